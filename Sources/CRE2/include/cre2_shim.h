// Placeholder; the rules work fills this in.
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
int cre2_shim_placeholder(void);
#ifdef __cplusplus
}
#endif
