#!/bin/sh
# page_browser.sh: the page of hearth serve in Debian's chromium, driven
# headless through playwright-core (page_browser.mjs): the token, a request,
# the consent dialog answered, the answer, the memory and audit views, no
# request leaving the server, cross-origin requests refused; screenshots in
# $HEARTH_BUILD/serve-node/screens.
. tests/serve/node_setup.sh serve/page_browser
chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || skip "no chromium at $chromium (make deps-browser installs Debian's, as root)"
export CHROMIUM="$chromium"
exec timeout 300 node "$NODE_DIR/page_browser.mjs"
