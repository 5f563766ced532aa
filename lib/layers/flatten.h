/* The CNHW <-> [feature][sample] transposes, shared by flatten and dense:
 * flatten_cnhw writes xf[(ch*S + s)*N + i] = x[(ch*N + i)*S + s];
 * unflatten_cnhw is its inverse (adding into x when accumulate). */
#ifndef PCNN_LAYERS_FLATTEN_H
#define PCNN_LAYERS_FLATTEN_H

#include <stdbool.h>
#include <stddef.h>

void flatten_cnhw(const float *x, float *xf, int c, int n, size_t s, int threads);
void unflatten_cnhw(const float *xf, float *x, int c, int n, size_t s, bool accumulate,
                    int threads);

#endif
