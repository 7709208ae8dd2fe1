/*
 * test_backend_registry.c — the one list of backend operations (DTNN_BACKEND_OPS) and the
 * registry built on it: the generated table has one slot per entry, the names are the slots'
 * in order and unique, the generic check names exactly the required slots a table leaves
 * NULL, every backend this machine can make passes it, and the registry refuses unknown names
 * listing the known ones.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "backend/backend.h"

/* Every slot is a function pointer: the struct is exactly the list, nothing else. */
_Static_assert(sizeof(dtnn_backend_ops) == BACKEND_OP_COUNT * sizeof(void (*)(void)),
               "dtnn_backend_ops holds something besides the list's slots");

static void test_names(void)
{
    CHECK(!strcmp(backend_op_name(0), "enter"));
    CHECK(backend_op_name(BACKEND_OP_COUNT) == NULL);
    CHECK(backend_op_name(-1) == NULL);
    for (int i = 0; i < BACKEND_OP_COUNT; i++)
        for (int j = i + 1; j < BACKEND_OP_COUNT; j++)
            CHECK(strcmp(backend_op_name(i), backend_op_name(j)) != 0);
    /* the slot a name stands for is the one at its position */
    int conv_forward = -1;
    for (int i = 0; i < BACKEND_OP_COUNT; i++)
        if (!strcmp(backend_op_name(i), "conv_forward"))
            conv_forward = i;
    CHECK(conv_forward >= 0);
    CHECK(conv_forward * sizeof(void (*)(void)) == offsetof(dtnn_backend_ops, conv_forward));
}

static void test_missing(void)
{
    dtnn_error err;
    dtnn_backend *cpu = dtnn__backend_create("cpu", 1, &err);
    CHECK_OK(cpu ? DTNN_OK : DTNN_ERR_ARG, &err);
    if (!cpu)
        return;
    char msg[512];
    CHECK(backend_ops_missing(cpu->op, msg, sizeof msg) == 0);
    CHECK(msg[0] == '\0');
    dtnn_backend_ops ops = *cpu->op;
    ops.conv_forward = NULL;
    ops.rmsprop_step = NULL;
    ops.check = NULL;           /* optional: not reported */
    ops.native_stream = NULL;   /* optional */
    CHECK(backend_ops_missing(&ops, msg, sizeof msg) == 2);
    CHECK(!strcmp(msg, "conv_forward, rmsprop_step"));
    memset(&ops, 0, sizeof ops);
    int required = 0;
#define COUNT_REQUIRED(need, ret, name, params) required += (need);
    DTNN_BACKEND_OPS(COUNT_REQUIRED)
#undef COUNT_REQUIRED
    CHECK(backend_ops_missing(&ops, msg, sizeof msg) == required);
    CHECK(required > 50 && required < BACKEND_OP_COUNT);
    /* a short buffer still counts every missing slot */
    CHECK(backend_ops_missing(&ops, msg, 8) == required);
    CHECK(strlen(msg) < 8);
    dtnn__backend_free(cpu);
}

static void test_registry(void)
{
    CHECK(dtnn_device_count() >= 3);
    int makeable = 0;
    for (int i = 0; i < dtnn_device_count(); i++) {
        int usable = -1;
        char why[512];
        const char *name = dtnn_device_name(i, &usable, why, sizeof why);
        CHECK(name != NULL && why[0] != '\0');
        printf("  %-12s %s\n", name, why);
        if (!usable)
            continue;
        dtnn_error err;
        dtnn_backend *be = dtnn__backend_create(name, 1, &err);
        CHECK(be != NULL);
        if (be) {
            char msg[512];
            CHECK(backend_ops_missing(be->op, msg, sizeof msg) == 0);
            CHECK(!strcmp(be->name, name));
            makeable++;
        }
        dtnn__backend_free(be);
    }
    CHECK(makeable >= 2);   /* cpu and cpu-guarded run everywhere */
    dtnn_error err;
    CHECK(dtnn__backend_create("tpu", 1, &err) == NULL);
    CHECK(strstr(err.message, "unknown device 'tpu'") != NULL);
    CHECK(strstr(err.message, "cpu, cpu-guarded, cuda") != NULL);
    CHECK(dtnn_device_name(dtnn_device_count(), NULL, NULL, 0) == NULL);
}

int main(void)
{
    test_names();
    test_missing();
    test_registry();
    printf("%d operations in the list\n", BACKEND_OP_COUNT);
    return test_finish("test_backend_registry");
}
