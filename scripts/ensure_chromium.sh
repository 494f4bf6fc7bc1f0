#!/bin/sh
# Install Debian's chromium for the dashboard's headless-browser test (tests/monitor/test_dashboard_browser.py)
# when it is missing and this shell is root with apt-get; anywhere else it does nothing. The test skips with the
# reason when chromium is missing, and fails instead under CI=true.
if command -v chromium >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure_chromium: chromium is missing and apt-get as root is not available; the dashboard browser test will skip" >&2
	exit 0
fi
echo "ensure_chromium: installing chromium (apt-get) for the dashboard browser test" >&2
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; then
	echo "ensure_chromium: apt-get could not install chromium; the dashboard browser test will skip (fail under CI=true)" >&2
fi
exit 0
