#include "dtnn.h"
int main(void) { return 0; }
