#!/usr/bin/env bash
# deb.sh STEP - the Debian packages (packaging/), made from this build tree by CPack, as
# `make deb` makes them from its own:
#   build     packs the build tree into $SLUICE_BUILD_DIR/deb-test/ (the fixture of the others)
#   lintian   lintian finds no error and no warning in any package (its overrides say why)
#   unit      systemd-analyze verify accepts sluiced.service with the package's files in place,
#             and rates its exposure OK; a unit with a fault fails the same check
#   contents  each package holds exactly the files expected, with their modes; control fields,
#             the README's and docs' links resolve inside the package (tests/docs/links.py);
#             conffiles, maintainer scripts and triggers; stripped programs with no RPATH; no
#             build or source path in any file; the settings file points into /var/lib/sluice
#             and the unit's file limit fits its max_clients
#   run       sluiced from the extracted packages, started with the packaged settings file (its
#             ports and paths overridden for the test), tells READY=1, answers PING and the
#             packaged `sluice`, and stops by PID with SIGTERM; the packaged sluice.so loads
#             into redis-server when that is installed
#   install   dpkg installs them all into a private copy of the system (overlays in a mount
#             namespace): the unit is enabled, the loader finds the libraries, a program builds
#             with pkg-config and runs; a changed settings file survives a reinstall; a purge
#             takes the settings, the state and the unit's enablement away
# Each step exits 77 (skipped) when a tool it needs is missing. Needs SLUICE_BUILD_DIR and
# SLUICE_SOURCE_DIR.
set -u
step=${1:?usage: deb.sh build|lintian|unit|contents|run|install}
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

DEBS=$SLUICE_BUILD_DIR/deb-test
VERSION=$(sed -n 's/^project(sluice VERSION \([0-9.]*\).*/\1/p' "$SLUICE_SOURCE_DIR/CMakeLists.txt")
# the libraries' ABI versions (their sonames' numbers), libsluice's and libsluice-client's
soversion() { sed -n "s/^set($1 \([0-9]*\))/\1/p" "$SLUICE_SOURCE_DIR/CMakeLists.txt"; }
LIB_SO=$(soversion SLUICE_SOVERSION)
CLIENT_SO=$(soversion SLUICE_CLIENT_SOVERSION)
[[ -n $LIB_SO && -n $CLIENT_SO ]] || { echo "deb: no SOVERSION in CMakeLists.txt"; exit 1; }
PACKAGES=(sluiced sluice-tools redis-sluice "libsluice$LIB_SO" "libsluice-client$CLIENT_SO"
    libsluice-dev)
# so_of PACKAGE: a library package's ABI version
so_of() { case $1 in libsluice-client*) echo "$CLIENT_SO" ;; *) echo "$LIB_SO" ;; esac; }

# deb PACKAGE: the file of PACKAGE built by the build step
deb() { echo "$DEBS/$1_${VERSION}_$(dpkg --print-architecture).deb"; }

need_packages() {
    need dpkg-deb
    if [ -f "$DEBS/skipped" ]; then
        echo "SKIP: no packages to check: the build step $(cat "$DEBS/skipped")"
        exit 77
    fi
    local p
    for p in "${PACKAGES[@]}"; do
        [ -f "$(deb "$p")" ] || { echo "no $(deb "$p"): the build step did not make it"; exit 1; }
    done
}

# extract DIR PACKAGE..: the packages' files under DIR, as dpkg would put them under /
extract() {
    local dir=$1 p
    shift
    mkdir -p "$dir"
    for p in "$@"; do
        dpkg-deb -x "$(deb "$p")" "$dir" || return 1
    done
}

step_build() {
    # the other steps skip too when this one does
    rm -rf "$DEBS"
    mkdir -p "$DEBS"
    echo "needs cpack, dpkg-shlibdeps, file, readelf and strip" >"$DEBS/skipped"
    need cpack dpkg-shlibdeps file readelf strip
    rm "$DEBS/skipped"
    local t0=$SECONDS
    (cd "$SLUICE_BUILD_DIR" && cpack --config CPackConfig.cmake -B "$DEBS") >"$TMP/cpack.log" 2>&1 ||
        { cat "$TMP/cpack.log"; exit 1; }
    local p
    for p in "${PACKAGES[@]}"; do
        check "built-$p" test -f "$(deb "$p")"
    done
    echo "deb: ${#PACKAGES[@]} packages in $((SECONDS - t0)) s"
    finish
}

step_lintian() {
    need lintian
    need_packages
    local debs=() p
    for p in "${PACKAGES[@]}"; do debs+=("$(deb "$p")"); done
    # info tags are printed, not failed on: the test build has not Debian's hardening flags
    # (make deb's has), and the libraries no symbols file
    lintian --fail-on error,warning --display-info "${debs[@]}" 2>&1 |
        grep -v "running with root privileges" >"$TMP/lintian.out"
    local rc=${PIPESTATUS[0]}
    cat "$TMP/lintian.out"
    check lintian-clean test "$rc" -eq 0
    check no-error-or-warning eval '! grep -Eq "^[EW]: " "$TMP/lintian.out"'
    finish
}

step_unit() {
    need systemd-analyze unshare
    need_packages
    if [ "$(id -u)" -ne 0 ] || ! unshare --mount --propagation private true 2>/dev/null; then
        echo "SKIP: needs root and mount namespaces, to put the package's files at /usr"
        exit 77
    fi
    local root=$TMP/root unit=$TMP/root/lib/systemd/system/sluiced.service
    extract "$root" sluiced sluice-tools || exit 1
    # the package's /usr over the machine's, in a mount namespace of this test only: verify
    # checks that ExecStart's program exists and that `man sluiced` finds the Documentation
    verify() { # UNIT: systemd-analyze verify and security of UNIT, its output in $TMP/verify.out
        unshare --mount --propagation private bash -c '
            mount -t overlay overlay -o "lowerdir=$1/usr:/usr" /usr || exit 3
            export MANPATH=/usr/share/man
            systemd-analyze verify "$2" && systemd-analyze security --offline=true --threshold=20 "$2"
        ' _ "$root" "$1" >"$TMP/verify.out" 2>&1
    }
    verify "$unit"
    check verify-and-security test $? -eq 0 || cat "$TMP/verify.out"
    check exposure-ok grep -Eq "Overall exposure level for sluiced.service: (0|1|2)\.[0-9] OK" \
        "$TMP/verify.out"
    # the same check fails on a fault verify must see: a program that is not there
    sed 's|^ExecStart=/usr/bin/sluiced |ExecStart=/usr/bin/sluiced-missing |' "$unit" \
        >"$TMP/sluiced.service"
    verify "$TMP/sluiced.service"
    check verify-sees-a-fault test $? -ne 0
    check verify-names-it grep -q "sluiced-missing" "$TMP/verify.out"
    finish
}

# contents_of PACKAGE: "MODE PATH[ -> TARGET]" per file and link of PACKAGE (no directories)
contents_of() {
    dpkg-deb -c "$(deb "$1")" | awk '$1 !~ /^d/ {
        line = $1 " " $6; for (i = 7; i <= NF; i++) line = line " " $i; print line }' |
        sed 's| \./| /|' | sort
}

# linked_files: the files of the source tree the packaged docs link to, which the sluiced
# package ships beside them (packaging/doc_links.py), one path a line, relative to its doc dir
linked_files() {
    local d=$TMP/linked/usr/share/doc/sluiced
    rm -rf "$TMP/linked"
    mkdir -p "$d/examples"
    cp -r "$SLUICE_SOURCE_DIR/docs" "$SLUICE_SOURCE_DIR/README.md" "$d/"
    rm -rf "$d/docs/man"
    touch "$d/copyright" "$d/examples/rules.yaml" "$d/examples/sluiced.yaml" "$d/examples/traffic.log"
    python3 "$SLUICE_SOURCE_DIR/packaging/doc_links.py" "$SLUICE_SOURCE_DIR" "$d" >&2 || return 1
    (cd "$d" && find . -type f ! -path './docs/*' ! -path './examples/*' ! -path ./README.md \
        ! -path ./copyright | sed 's|^\./||')
}

# expected PACKAGE: what contents_of PACKAGE must print
expected() {
    local p=$1 v=$VERSION so
    so=$(so_of "$p")
    local type
    type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$SLUICE_BUILD_DIR/CMakeCache.txt" |
        tr '[:upper:]' '[:lower:]')
    type=${type:-noconfig} # the name CMake gives a build of no type
    {
        echo "-rw-r--r-- /usr/share/doc/$p/changelog.gz"
        echo "-rw-r--r-- /usr/share/doc/$p/copyright"
        case $p in
        sluiced)
            echo "-rw-r--r-- /etc/sluice/sluiced.yaml"
            echo "-rw-r--r-- /lib/systemd/system/sluiced.service"
            echo "-rwxr-xr-x /usr/bin/sluiced"
            echo "-rw-r--r-- /usr/share/doc/sluiced/README.md"
            echo "-rw-r--r-- /usr/share/doc/sluiced/examples/rules.yaml"
            echo "-rw-r--r-- /usr/share/doc/sluiced/examples/sluiced.yaml"
            echo "-rw-r--r-- /usr/share/doc/sluiced/examples/traffic.log"
            (cd "$SLUICE_SOURCE_DIR" && find docs -name '*.md' -o -name '*.png') |
                sed 's|^|-rw-r--r-- /usr/share/doc/sluiced/|'
            linked_files | sed 's|^|-rw-r--r-- /usr/share/doc/sluiced/|'
            echo "-rw-r--r-- /usr/share/man/man8/sluiced.8.gz"
            ;;
        sluice-tools)
            echo "-rwxr-xr-x /usr/bin/sluice"
            echo "-rw-r--r-- /usr/share/man/man1/sluice.1.gz"
            ;;
        redis-sluice)
            echo "-rwxr-xr-x /usr/lib/sluice/sluice.so"
            echo "-rw-r--r-- /usr/share/lintian/overrides/$p"
            ;;
        "libsluice$LIB_SO" | "libsluice-client$CLIENT_SO")
            local lib=${p%"$so"}
            echo "lrwxrwxrwx /usr/lib/$lib.so.$so -> $lib.so.$v"
            echo "-rw-r--r-- /usr/lib/$lib.so.$v"
            echo "-rw-r--r-- /usr/share/lintian/overrides/$p"
            ;;
        libsluice-dev)
            local f
            for f in client.h sluice.h version.h; do echo "-rw-r--r-- /usr/include/sluice/$f"; done
            for f in sluiceClientTargets-$type.cmake sluiceClientTargets.cmake sluiceConfig.cmake \
                sluiceConfigVersion.cmake sluiceTargets-$type.cmake sluiceTargets.cmake; do
                echo "-rw-r--r-- /usr/lib/cmake/sluice/$f"
            done
            echo "-rw-r--r-- /usr/lib/libsluice-client.a"
            echo "lrwxrwxrwx /usr/lib/libsluice-client.so -> libsluice-client.so.$CLIENT_SO"
            echo "-rw-r--r-- /usr/lib/libsluice.a"
            echo "lrwxrwxrwx /usr/lib/libsluice.so -> libsluice.so.$LIB_SO"
            echo "-rw-r--r-- /usr/lib/pkgconfig/sluice-client.pc"
            echo "-rw-r--r-- /usr/lib/pkgconfig/sluice.pc"
            echo "-rw-r--r-- /usr/share/lintian/overrides/$p"
            ;;
        esac
    } | sort
}

# field PACKAGE NAME: a control field of PACKAGE
field() { dpkg-deb -f "$(deb "$1")" "$2"; }

# control_files PACKAGE: the names of its control files, one line
control_files() {
    dpkg-deb --ctrl-tarfile "$(deb "$1")" | tar -t | sed 's|^\./||' | grep -v '^$' | sort | tr '\n' ' '
}

step_contents() {
    need readelf file
    need_packages
    local p arch so
    arch=$(dpkg --print-architecture)
    for p in "${PACKAGES[@]}"; do
        contents_of "$p" >"$TMP/$p.got"
        expected "$p" >"$TMP/$p.want"
        check "files-$p" diff "$TMP/$p.want" "$TMP/$p.got"
        check "owner-$p" eval "! dpkg-deb -c '$(deb "$p")' | awk '{print \$2}' | grep -vqx root/root"
        check "version-$p" test "$(field "$p" Version)" = "$VERSION"
        check "arch-$p" test "$(field "$p" Architecture)" = "$arch"
        check "maintainer-$p" test -n "$(field "$p" Maintainer)"
    done

    # control files: the service's scripts and conffile; the libraries' trigger and shlibs
    check control-sluiced test "$(control_files sluiced)" = "conffiles control md5sums postinst postrm prerm "
    check conffiles test "$(dpkg-deb --ctrl-tarfile "$(deb sluiced)" | tar -xO ./conffiles)" = \
        /etc/sluice/sluiced.yaml
    for p in "libsluice$LIB_SO" "libsluice-client$CLIENT_SO"; do
        so=$(so_of "$p")
        check "control-$p" test "$(control_files "$p")" = "control md5sums postinst postrm shlibs triggers "
        check "trigger-$p" test "$(dpkg-deb --ctrl-tarfile "$(deb "$p")" | tar -xO ./triggers | grep -v '^#')" = \
            "activate-noawait ldconfig"
        check "shlibs-$p" grep -qx "${p%"$so"} $so $p (>= $VERSION)" \
            <(dpkg-deb --ctrl-tarfile "$(deb "$p")" | tar -xO ./shlibs)
    done
    check depends-sluiced eval 'field sluiced Depends | grep -q "libuv1"'
    check depends-dev eval "field libsluice-dev Depends | grep -qF 'libsluice$LIB_SO (= $VERSION)'"

    # the programs and libraries: stripped, no RPATH; no file holds a path of this build
    local root=$TMP/root f
    extract "$root" "${PACKAGES[@]}" || exit 1
    for f in usr/bin/sluiced usr/bin/sluice usr/lib/sluice/sluice.so "usr/lib/libsluice.so.$VERSION" \
        "usr/lib/libsluice-client.so.$VERSION"; do
        check "stripped-$f" eval "! readelf -S '$root/$f' | grep -q debug_info"
        check "no-rpath-$f" eval "! readelf -d '$root/$f' | grep -Eq 'RPATH|RUNPATH'"
    done
    check no-build-paths eval "! grep -rlF -e '$SLUICE_BUILD_DIR' -e '$SLUICE_SOURCE_DIR' '$root'"
    check pc-no-rpath eval "! grep -q rpath '$root/usr/lib/pkgconfig/sluice.pc'"
    check module-executable test -x "$root/usr/lib/sluice/sluice.so"

    # the settings file: the state in /var/lib/sluice; the unit reads it and allows the file
    # descriptors max_clients needs (a connection each, and room for the rest)
    local cfg=$root/etc/sluice/sluiced.yaml unit=$root/lib/systemd/system/sluiced.service
    check config-store-in-state grep -qx "config_store: /var/lib/sluice/sluice.db" "$cfg"
    check snapshot-in-state grep -qx "snapshot: /var/lib/sluice/sluice.snapshot" "$cfg"
    check unit-reads-config grep -qx "ExecStart=/usr/bin/sluiced --config /etc/sluice/sluiced.yaml" "$unit"
    check unit-state-dir grep -qx "StateDirectory=sluice" "$unit"
    local clients nofile
    clients=$(sed -n 's/^max_clients: //p' "$cfg")
    nofile=$(sed -n 's/^LimitNOFILE=//p' "$unit")
    check nofile-fits-clients test "${nofile:-0}" -ge $((${clients:-1000000} + 1024))
    check man-pages eval "zcat '$root/usr/share/man/man8/sluiced.8.gz' | grep -q '^.TH SLUICED 8'"
    check man-page-sluice eval "zcat '$root/usr/share/man/man1/sluice.1.gz' | grep -q '^.TH SLUICE 1'"

    # the packaged README and docs: every relative link and anchor resolves in the packages
    # (packaging/doc_links.py made those into the source tree work: LICENSE is the copyright
    # file, a header libsluice-dev's, the rest copied in beside the docs)
    check packaged-doc-links python3 "$SLUICE_SOURCE_DIR/tests/docs/links.py" \
        --source "$root/usr/share/doc/sluiced"
    check packaged-doc-license grep -q '\[LICENSE\](copyright)' "$root/usr/share/doc/sluiced/README.md"
    finish
}

step_run() {
    need redis-cli
    need_packages
    local root=$TMP/root
    extract "$root" sluiced sluice-tools redis-sluice || exit 1
    SLUICED=$root/usr/bin/sluiced
    launch_noted() { # NAME ARGS..: the ports for notify_listener.py, then sluiced
        echo "${SERVE_PORTS[*]}" >"$TMP/$1.ports"
        lib_launch_sluiced "$@"
    }
    start_bg listener python3 "$SLUICE_SOURCE_DIR/tests/integration/notify_listener.py" \
        "$TMP/notify.sock" "$TMP/notify.out" "$TMP/packaged.ports"
    poll 10 test -S "$TMP/notify.sock" || { echo "the listener did not bind"; exit 1; }
    # the packaged settings, with the ports and the state paths of this test
    NOTIFY_SOCKET=$TMP/notify.sock serve packaged 3 launch_noted \
        --config "$root/etc/sluice/sluiced.yaml" --config-store "$TMP/store.db" \
        --snapshot "$TMP/sluice.snapshot" || { cat "$TMP/packaged.log"; exit 1; }
    check ready poll 10 grep -qx "READY=1 PONG 2" "$TMP/notify.out"
    check ping test "$(redis-cli -p "$RESP_PORT" PING 2>&1)" = PONG
    check packaged-cli test "$("$root/usr/bin/sluice" -p "$RESP_PORT" rules list 2>&1)" = ""
    check packaged-cli-info eval "'$root/usr/bin/sluice' -p '$RESP_PORT' info server | grep -q '^sluice_version:$VERSION'"
    check inline-rule test "$(redis-cli -p "$RESP_PORT" SL.THROTTLE k gcra 5 1000 | head -3 | tr '\n' ' ')" = "1 6 5 "
    stop_bg packaged TERM
    check stop-exit-0 test $? -eq 0
    check stopping poll 10 grep -qx "STOPPING=1" "$TMP/notify.out"
    check snapshot-written test -s "$TMP/sluice.snapshot"

    if command -v redis-server >/dev/null; then
        start_redis redis --loadmodule "$root/usr/lib/sluice/sluice.so" ||
            { cat "$TMP/redis.log"; exit 1; }
        check module-loads test "$(redis-cli -p "$REDIS_PORT" SL.THROTTLE k gcra 5 1000 | head -3 | tr '\n' ' ')" = "1 6 5 "
        stop_bg redis TERM
    else
        echo "deb: redis-server is not installed; the packaged sluice.so was not loaded"
    fi
    finish
}

# install_here DIR: installs and purges the packages inside a mount namespace whose /etc, /usr
# and /var are overlays with their upper layers in DIR (nothing on the machine changes), and
# prints what it found, one "NAME VALUE" line each
install_here() {
    local up=$1
    mkdir -p "$up"/{etc,etc-w,usr,usr-w,var,var-w}
    unshare --mount --propagation private bash -c '
        up=$1 debs=$2 version=$3 tmp=$4 so=$5
        for d in etc usr var; do
            mount -t overlay overlay -o "lowerdir=/$d,upperdir=$up/$d,workdir=$up/$d-w" "/$d" || exit 3
        done
        export DEBIAN_FRONTEND=noninteractive
        dpkg -i "$debs"/*.deb >"$tmp/dpkg-install.log" 2>&1
        echo "install-rc $?"
        for p in $(cd "$debs" && ls *.deb | sed "s/_.*//"); do
            echo "status-$p $(dpkg-query -W -f="\${db:Status-Status}" "$p")"
        done
        echo "enabled $(readlink /etc/systemd/system/multi-user.target.wants/sluiced.service)"
        echo "ldconfig $(ldconfig -p | grep -c "libsluice.so.$so ")"
        echo "pkgconfig $(pkg-config --modversion sluice)"
        printf "#include <sluice/sluice.h>\n#include <stdio.h>\nint main(void) { puts(SL_VERSION_STRING); return 0; }\n" >"$tmp/app.c"
        cc "$tmp/app.c" -o "$tmp/app" $(pkg-config --cflags --libs sluice) && echo "app $("$tmp/app")"
        echo "man $(man -w sluiced 2>/dev/null)"
        # a changed settings file survives a reinstall; state and settings go with a purge
        echo "# changed here" >>/etc/sluice/sluiced.yaml
        dpkg -i --force-confold "$debs"/sluiced_*.deb >>"$tmp/dpkg-install.log" 2>&1
        echo "conffile-kept $(grep -c "^# changed here" /etc/sluice/sluiced.yaml)"
        mkdir -p /var/lib/private/sluice && touch /var/lib/private/sluice/sluice.db &&
            ln -s private/sluice /var/lib/sluice
        dpkg --purge sluiced >>"$tmp/dpkg-install.log" 2>&1
        echo "purge-rc $?"
        echo "purged-etc $(ls -d /etc/sluice 2>/dev/null | wc -l)"
        echo "purged-state $(ls -d /var/lib/sluice /var/lib/private/sluice 2>/dev/null | wc -l)"
        echo "purged-enabled $(ls /etc/systemd/system/multi-user.target.wants/sluiced.service 2>/dev/null | wc -l)"
        echo "purged-mask $(ls /etc/systemd/system/sluiced.service 2>/dev/null | wc -l)"
    ' _ "$up" "$DEBS" "$VERSION" "$TMP" "$LIB_SO"
}

# the NAME line of install_here's output is "NAME WANT"
found() { grep -qx "$1 $2" "$TMP/install.out" || { echo "  want '$1 $2', got '$(grep "^$1 " "$TMP/install.out")'"; return 1; }; }

step_install() {
    need dpkg unshare cc pkg-config man
    need_packages
    if [ "$(id -u)" -ne 0 ] || ! unshare --mount --propagation private true 2>/dev/null; then
        echo "SKIP: needs root and mount namespaces, to install into a private copy of the system"
        exit 77
    fi
    install_here "$TMP/overlay" >"$TMP/install.out"
    check install found install-rc 0 || cat "$TMP/dpkg-install.log"
    local p
    for p in "${PACKAGES[@]}"; do
        check "installed-$p" found "status-$p" installed
    done
    check enabled found enabled /lib/systemd/system/sluiced.service
    check ldconfig-trigger found ldconfig 1
    check pkg-config found pkgconfig "$VERSION"
    check dev-package-builds found app "$VERSION"
    check man-page found man /usr/share/man/man8/sluiced.8.gz
    check conffile-kept found conffile-kept 1
    check purge found purge-rc 0
    check purge-removes-settings found purged-etc 0
    check purge-removes-state found purged-state 0
    check purge-disables found purged-enabled 0
    check purge-unmasks found purged-mask 0
    finish
}

case $step in
build) step_build ;;
install) step_install ;;
lintian) step_lintian ;;
unit) step_unit ;;
contents) step_contents ;;
run) step_run ;;
*) echo "deb.sh: unknown step '$step'"; exit 2 ;;
esac
