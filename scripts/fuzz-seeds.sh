#!/usr/bin/env bash
# Writes the fuzz seed corpus into DIR from Protocol/vectors/vectors.json:
# every vector's bytes (vector-<name>), every frame payload on its own
# (payload-<name>-<n>, for the fuzzer's Envelope-decoding half), and one
# stream of the well-formed frames phones and the HMI send, in file order and
# without the Goodbye (session: a whole car session for SessionFuzz).
# Plain bash, awk and sed: no jq or python needed.
#   scripts/fuzz-seeds.sh DIR
set -euo pipefail
dir="${1:?usage: scripts/fuzz-seeds.sh DIR}"
vectors="$(dirname "$0")/../Protocol/vectors/vectors.json"
mkdir -p "$dir"

bytes() {  # hex digits (spaces and | allowed) on stdin -> raw bytes on stdout
  local hex
  hex="$(tr -d ' |\n')"
  # shellcheck disable=SC2059  # the escapes are the point
  printf "$(printf '%s' "$hex" | sed 's/../\\x&/g')"
}

# One line per item: "kind<TAB>name<TAB>hex" (vectors.json puts one key per line).
awk -F'"' '
  /^    \{/                          { n = 0; session = 1; from = ""; state = "" }
  $2 == "name" && /^      "/         { name = $4 }
  $2 == "from"                       { from = $4 }
  $2 == "state"                      { state = $4 }
  $2 == "hex"                        { hex = $4; print "vector\t" name "\t" hex }
  $2 == "payload_hex" && $4 != ""    { print "payload\t" name "-" n++ "\t" $4 }
  $2 == "framing_error"              { session = 0 }
  $2 == "incomplete" && /true/       { session = 0 }
  $2 == "code" && $4 != "ERROR_CODE_OK" { session = 0 }
  $2 == "reply" && session && from == "client" && state == "established" && name !~ /^goodbye/ { print "session\tsession\t" hex }
' "$vectors" | {
  count=0
  : > "$dir/session"
  while IFS=$'\t' read -r kind name hex; do
    case "$kind" in
      vector) bytes <<<"$hex" > "$dir/vector-$name"; count=$((count + 1)) ;;
      payload) bytes <<<"$hex" > "$dir/payload-$name"; count=$((count + 1)) ;;
      session) bytes <<<"$hex" >> "$dir/session" ;;
    esac
  done
  echo "fuzz-seeds: wrote $((count + 1)) seeds to $dir"
}
