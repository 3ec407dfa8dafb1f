# Sourced by scripts/test.sh: installing the system packages the tests use (bubblewrap, chromium).
# apt_install PACKAGE WHAT: as root with apt-get, install PACKAGE (updating the package lists when
# the first try fails); when it cannot, say so with the end of apt's own output (why it failed).
apt_install() {
  local log
  log=$(mktemp)
  if ! { apt-get install -y -q "$1" >"$log" 2>&1 || { apt-get update -q >>"$log" 2>&1 && apt-get install -y -q "$1" >>"$log" 2>&1; }; }; then
    echo "note: could not install $1; $2 will be skipped. apt-get said (last lines of $log):"
    tail -n 15 "$log" | sed 's/^/  | /'
    return 0
  fi
  rm -f "$log"
}
can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }
