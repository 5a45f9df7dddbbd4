#!/usr/bin/env bash
# Installs what building and running headunitd needs, when it is missing:
# libsystemd-dev, libopus-dev and pkg-config (the Systemd module links
# libsystemd; the audio mixer decodes Opus with libopus).
# Extra Debian packages may be named as arguments (CI adds `systemd`).
# Swift itself is expected on PATH (https://www.swift.org/install/linux/).
# Runs `apt-get update` at most once, and only when something is missing.
set -euo pipefail

# libopenh264-dev: the base view's H.264 encoder and decoder (HeadUnitVideo, PROTOCOL.md section 25.2);
# libopus-dev: the audio streams' Opus decoder (PROTOCOL.md section 24);
# libasound2-dev: the car's speakers and microphone on a board ("alsa:DEVICE", section 24.5);
# espeak-ng: the MapsApp example speaks its prompts with it (a chime without it);
# libcairo2-dev: the MapsApp example draws its map with cairo (the CCairo system-library target).
packages=(libsystemd-dev libopus-dev libasound2-dev pkg-config libopenh264-dev espeak-ng libcairo2-dev "$@")

if ! command -v swift >/dev/null 2>&1; then
  echo "setup: swift is not on PATH; install a Swift 6 toolchain first" >&2
  exit 1
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
  # Not Debian-like (a developer's Mac, another distro): nothing to install from here.
  if ! pkg-config --exists libsystemd 2>/dev/null; then
    echo "setup: not a Debian system; make sure libsystemd (development files) and pkg-config are installed" >&2
  fi
  exit 0
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: dependencies present (${packages[*]})"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "setup: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
