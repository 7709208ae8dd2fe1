/*
 * test_name_index.c — the hash index by name (core/name_index.c) that the model and the ONNX
 * importer look names up through: every name added is found with its id through growth and
 * an owner that moves its array; a missing name is not found; a name added again finds the
 * newer id. (That a graph of 100,000 nodes loads is tests/cli_hostile_paths.sh's.)
 */
#include <stdlib.h>
#include <string.h>

#include "core/name_index.h"
#include "testutil.h"

typedef struct {
    char (*names)[16];
} owner;

static const char *key(const void *ctx, int id) { return ((const owner *)ctx)->names[id]; }

int main(void)
{
    enum { N = 20000 };
    owner o = {malloc(sizeof *o.names * 4)};
    name_index ix;
    name_index_init(&ix, key, &o);
    CHECK(name_index_find(&ix, "n0") == -1);
    int cap = 4, bad = 0;
    for (int i = 0; i < N; i++) {
        if (i == cap) {
            cap *= 2;
            o.names = realloc(o.names, sizeof *o.names * (size_t)cap);   /* the owner moves */
        }
        snprintf(o.names[i], sizeof o.names[i], "n%d", i);
        CHECK(name_index_add(&ix, i) == 0);
    }
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        bad += name_index_find(&ix, name) != i;
    }
    printf("%d names added, %d found with a wrong id; %zu slots\n", N, bad, ix.cap);
    CHECK(bad == 0 && ix.cap >= 2 * (size_t)N);
    CHECK(name_index_find(&ix, "n20000") == -1 && name_index_find(&ix, "") == -1 &&
          name_index_find(&ix, NULL) == -1);
    /* id 7 renamed to "n3" and added again: "n3" now finds 7, "n7" no longer does */
    snprintf(o.names[7], sizeof o.names[7], "n3");
    CHECK(name_index_add(&ix, 7) == 0);
    CHECK(name_index_find(&ix, "n3") == 7);
    owner moved = o;
    name_index_rebind(&ix, &moved);
    CHECK(name_index_find(&ix, "n19999") == 19999);
    name_index_free(&ix);
    CHECK(name_index_find(&ix, "n1") == -1);
    free(o.names);
    return test_finish("test_name_index");
}
