#include "cre2_shim.h"
#include <re2/re2.h>
extern "C" int cre2_shim_placeholder(void) { return 0; }
