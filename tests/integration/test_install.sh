#!/usr/bin/env bash
# The installed library is usable the two ways the README promises: pkg-config and CMake's
# find_package(sluice). Installs the build tree into a temp prefix, builds a small program
# against it each way (shared and static), runs it.
set -euo pipefail
build=${SLUICE_BUILD_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in include/sluice/sluice.h include/sluice/version.h lib/pkgconfig/sluice.pc \
         lib/cmake/sluice/sluiceConfig.cmake bin/sluice; do
  [ -e "$tmp/prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
ls "$tmp/prefix/lib/"libsluice.so* "$tmp/prefix/lib/libsluice.a" >/dev/null

cat > "$tmp/app.c" <<'C'
#include <stdio.h>
#include <sluice/sluice.h>
int main(void)
{
    sl_rule_t rule;
    sl_table_t *table;
    if (sl_rule_init(&rule, SL_SLIDING_LOG, 3, 10 * SL_NS_PER_SEC) != SL_OK ||
        sl_table_create(&rule, NULL, &table) != SL_OK)
        return 2;
    const long at_ms[] = {0, 1000, 2000, 3000, 11000};
    for (int i = 0; i < 5; i++) {
        sl_decision_t d;
        sl_table_decide(table, "A", 1, 1, at_ms[i] * SL_NS_PER_MS, &d);
        printf("%d", d.allowed);
    }
    printf(" %s\n", SL_VERSION_STRING);
    sl_table_free(table);
    return 0;
}
C
want="11101 $(sed -n 's/^project(sluice VERSION \([0-9.]*\).*/\1/p' "$SLUICE_SOURCE_DIR/CMakeLists.txt")"

# pkg-config, shared library
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cc "$tmp/app.c" -o "$tmp/app-pc" $(pkg-config --cflags --libs sluice)
got=$(LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/app-pc")
[ "$got" = "$want" ] || { echo "pkg-config build printed '$got', want '$want'"; exit 1; }

# pkg-config, static library
cc "$tmp/app.c" -o "$tmp/app-static" $(pkg-config --cflags sluice) "$tmp/prefix/lib/libsluice.a" \
  $(pkg-config --libs-only-other --static sluice) -lpthread
got=$("$tmp/app-static")
[ "$got" = "$want" ] || { echo "static build printed '$got', want '$want'"; exit 1; }

# CMake find_package
mkdir -p "$tmp/proj"
cp "$tmp/app.c" "$tmp/proj/app.c"
cat > "$tmp/proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(app C)
find_package(sluice 0.1 REQUIRED)
add_executable(app app.c)
target_link_libraries(app sluice::sluice)
CM
cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/proj/build" >/dev/null
got=$(LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/proj/build/app")
[ "$got" = "$want" ] || { echo "find_package build printed '$got', want '$want'"; exit 1; }

"$tmp/prefix/bin/sluice" --help >/dev/null
echo "install: pkg-config (shared, static) and find_package(sluice) builds print '$want'"
