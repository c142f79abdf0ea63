#!/usr/bin/env bash
# test_server_ui.sh - the console's files as sluiced serves them, driven by curl: /ui/ is the
# index and /ui redirects to it; every file under src/server/ui/ is served byte for byte with its
# content type; a strict Content-Security-Policy, nosniff and an ETag on each, and 304 for a
# matching If-None-Match; unknown files are 404; only GET and HEAD. (The pages themselves, in a
# browser: test_console.sh.)
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need curl

start_sluiced srv --config-store "$TMP/sluice.db" --snapshot "" || { cat "$TMP/srv.log"; exit 1; }
BASE=http://127.0.0.1:$HTTP_PORT
UI=$SLUICE_SOURCE_DIR/src/server/ui

# head_of URL [CURL ARGS..]: the response head, CRs dropped, header names lower-cased
head_of() {
    local url=$1
    shift
    curl -s -o /dev/null -D - "$@" "$url" | tr -d '\r' | sed 's/^\([^:]*\):/\L\1:/'
}
header() { grep -i "^$2: " <<<"$1" | head -1 | cut -d' ' -f2-; }
status() { head -1 <<<"$1" | cut -d' ' -f2; }

h=$(head_of "$BASE/ui/")
check index-200 test "$(status "$h")" = 200
check index-html test "$(header "$h" content-type)" = "text/html; charset=utf-8"
curl -s "$BASE/ui/" >"$TMP/index.html"
check index-bytes cmp -s "$TMP/index.html" "$UI/index.html"
csp=$(header "$h" content-security-policy)
check csp-script-self grep -q "script-src 'self';" <<<"$csp"
check csp-default-none grep -q "default-src 'none'" <<<"$csp"
check csp-no-inline test "$(grep -c "unsafe-inline\|unsafe-eval" <<<"$csp")" -eq 0
check nosniff test "$(header "$h" x-content-type-options)" = nosniff
check no-cache test "$(header "$h" cache-control)" = no-cache

h=$(head_of "$BASE/ui")
check bare-ui-308 test "$(status "$h")" = 308
check bare-ui-location test "$(header "$h" location)" = /ui/

# every file, byte for byte, with the type its extension says
declare -A want=([html]="text/html; charset=utf-8" [js]="text/javascript; charset=utf-8"
    [css]="text/css; charset=utf-8" [svg]="image/svg+xml" [txt]="text/plain; charset=utf-8")
files=0
while IFS= read -r rel; do
    files=$((files + 1))
    curl -s -D "$TMP/h" -o "$TMP/body" "$BASE/ui/$rel"
    check "bytes-$rel" cmp -s "$TMP/body" "$UI/$rel"
    type=$(tr -d '\r' <"$TMP/h" | grep -i '^content-type: ' | cut -d' ' -f2-)
    ext=${rel##*.}
    if [ -n "${want[$ext]+set}" ]; then
        check "type-$rel" test "$type" = "${want[$ext]}"
    else
        echo "no content type expected for '.$ext' files ($rel, served as '$type'): add it to want"
        check "type-$rel" false
    fi
done < <(cd "$UI" && find . -type f ! -name '.*' | sed 's|^\./||' | sort)
check some-files test "$files" -ge 8
check uplot-licence test -s "$UI/vendor/uPlot.LICENSE.txt"

# ETag: a strong validator that changes with the bytes; If-None-Match gets 304 with no body
h=$(head_of "$BASE/ui/app.js")
etag=$(header "$h" etag)
check etag-quoted grep -qE '^"[0-9a-f]{32}"$' <<<"$etag"
check etag-differs test "$etag" != "$(header "$(head_of "$BASE/ui/dom.js")" etag)"
h=$(head_of "$BASE/ui/app.js" -H "If-None-Match: $etag")
check etag-304 test "$(status "$h")" = 304
check etag-304-csp test -n "$(header "$h" content-security-policy)"
check etag-304-empty test -z "$(curl -s -H "If-None-Match: $etag" "$BASE/ui/app.js")"
h=$(head_of "$BASE/ui/app.js" -H 'If-None-Match: "0000"')
check etag-other-200 test "$(status "$h")" = 200

for path in /ui/nope.js /ui/vendor/ /ui/../healthz /ui/vendor/../app.js /ui/index.html/x \
    "/ui/$(printf 'a%.0s' {1..300})"; do
    check "404-$path" test "$(curl -s -o /dev/null -w '%{http_code}' --path-as-is "$BASE$path")" = 404
done
check post-405 test "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$BASE/ui/")" = 405
check head-200 test "$(curl -s -o /dev/null -w '%{http_code}' -I "$BASE/ui/app.js")" = 200

stop_bg srv TERM
check exit-0 test $? -eq 0
finish
