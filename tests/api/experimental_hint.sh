#!/usr/bin/env bash
# A host that uses a name of pcnn.h's section 9 without defining
# PCNN_EXPERIMENTAL fails to compile, and the compiler's message says to
# define it; with it defined (or on a second include with it) the same host
# compiles, and so does a 0.1.0-era host using only stable names.  Every C
# and C++ compiler given is tried (gcc, clang, g++, clang++).
#   experimental_hint.sh -I<dir>... -- <compiler>...
set -uo pipefail
flags=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do flags+=("$1"); shift; done
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

cat >"$tmp/option.c" <<'C'
#include "pcnn.h"
int use(pcnn_net *net) { return (int)pcnn_net_set_option(net, PCNN_OPT_ENGINE, 2); }
C
cat >"$tmp/function.c" <<'C'
#include "pcnn.h"
int use(pcnn_net *net) { const int parts[4] = {1, 1, 1, 1}; return (int)pcnn_net_set_distribution(net, parts); }
C
cat >"$tmp/type.c" <<'C'
#include "pcnn.h"
int use(void) { pcnn_perfmodel *model = 0; return (int)pcnn_perfmodel_create(&model); }
C
cat >"$tmp/constant.c" <<'C'
#include "pcnn.h"
int use(void) { return PCNN_DIM_W + (int)PCNN_EXCHANGE_AUTO; }
C
# Stable names only, as a 0.1.0 host (plus what 0.2.0 made stable).
cat >"$tmp/stable.c" <<'C'
#include "pcnn.h"
int use(pcnn_net *net, pcnn_layer *in, pcnn_layer **out)
{
    pcnn_status st = pcnn_net_set_option(net, PCNN_OPT_SYNC_BATCHNORM, 1);
    if (st == PCNN_OK) st = pcnn_conv3d(net, in, 4, 3, 1, 1, 1, out);
    if (st == PCNN_OK) st = pcnn_net_abort(net);
    return (int)st + (int)pcnn_net_option_info(PCNN_OPT_THREADS, 0, 0, 0, 0);
}
C
# The experimental section on a second include.
cat >"$tmp/reinclude.c" <<'C'
#include "pcnn.h"
#define PCNN_EXPERIMENTAL
#include "pcnn.h"
int use(pcnn_net *net)
{
    pcnn_perfmodel *model = 0;
    const int parts[4] = {1, 1, 1, 1};
    return (int)pcnn_net_set_option(net, PCNN_OPT_ENGINE, 2) + (int)pcnn_perfmodel_create(&model) +
           (int)pcnn_net_set_distribution(net, parts) + PCNN_DIM_W + (int)PCNN_EXCHANGE_AUTO;
}
C

for compiler in "$@"; do
  case "$compiler" in *++*) lang=(-x c++ -std=c++11) ;; *) lang=(-x c -std=c11) ;; esac
  for host in option function type constant; do
    if "$compiler" "${lang[@]}" -fsyntax-only "${flags[@]}" "$tmp/$host.c" >"$tmp/out" 2>&1; then
      echo "FAIL $compiler: the $host host compiled without PCNN_EXPERIMENTAL"; fail=1
    elif grep -q "define[ _]PCNN_EXPERIMENTAL" "$tmp/out"; then
      echo "ok   $compiler: $host host: $(grep -m1 -o "error: .*" "$tmp/out" | cut -c1-150)"
    else
      echo "FAIL $compiler: the $host host's error does not say to define PCNN_EXPERIMENTAL:"
      sed 's/^/     /' "$tmp/out" | head -8; fail=1
    fi
    if ! "$compiler" "${lang[@]}" -fsyntax-only -Wall -Wextra -Werror -DPCNN_EXPERIMENTAL \
         "${flags[@]}" "$tmp/$host.c" >"$tmp/out" 2>&1; then
      echo "FAIL $compiler: the $host host does not compile with PCNN_EXPERIMENTAL:"
      sed 's/^/     /' "$tmp/out" | head -8; fail=1
    fi
  done
  for host in stable reinclude; do
    if "$compiler" "${lang[@]}" -fsyntax-only -Wall -Wextra -Werror "${flags[@]}" "$tmp/$host.c" \
         >"$tmp/out" 2>&1; then
      echo "ok   $compiler: $host host compiles"
    else
      echo "FAIL $compiler: the $host host does not compile:"; sed 's/^/     /' "$tmp/out" | head -8
      fail=1
    fi
  done
done
exit $fail
