#!/bin/sh
# Apple-style code using an API the protocol cannot carry must fail to
# compile with the reason (docs/CARPLAYKIT.md, "Apple APIs that fail to
# compile"): type-checks a snippet that uses each against the built
# CarPlayKit module and checks that every use is an error naming why.
#   scripts/carplaykit-unavailable-check.sh     (after swift build)
set -eu
cd "$(dirname "$0")/.."
scratch="${HEADUNIT_SCRATCH:-.build}"  # as in scripts/test.sh
bin=$(swift build --scratch-path "$scratch" --show-bin-path)
includes=$(find "$scratch/checkouts" -path '*/include' -type d | sed 's/^/-I /')
maps=$(find "$(readlink -f "$bin")" -maxdepth 2 -name module.modulemap -exec dirname {} \; | sort -u | sed 's/^/-I /')
# System library targets (COpenH264 under CarPlayKit's windows) keep their module maps in Sources/.
system_maps=$(find Sources -maxdepth 2 -name module.modulemap -exec dirname {} \; | sort -u | sed 's/^/-I /')
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/uses.swift" <<'SWIFT'
import CarPlayKit
@MainActor func uses(_ map: CPMapTemplate, _ session: CPNavigationSession, _ maneuver: CPManeuver, _ button: CPBarButton) {
    _ = CPMessageComposeBarButton(image: nil)
    _ = CPInformationRatingItem(rating: 4, maximumRating: 5, title: "Rating", detail: nil)
    _ = CPNowPlayingTemplate.shared.nowPlayingMode
    _ = button.buttonStyle
    _ = map.backButton
    _ = CPAlertAction(title: "Go", color: 0) { _ in }
    _ = CPListSection(items: [], header: "h", headerSubtitle: nil, headerImage: nil, headerButton: nil, sectionIndexTitle: nil)
    session.pauseTrip(for: .loading, description: nil, turnCardColor: nil)
    _ = map.tripEstimateStyle
}
SWIFT
# shellcheck disable=SC2086
if swiftc -typecheck -swift-version 6 -I "$bin/Modules" $includes $maps $system_maps "$dir/uses.swift" > "$dir/out.txt" 2>&1; then
    echo "carplaykit-unavailable-check: the snippet compiled; every use must be an error" >&2
    exit 1
fi
expected=9
# One error per use line, each "'X' is unavailable: <why>" (the compiler's header lines).
found=$(grep -o "uses.swift:[0-9]*:[0-9]*: error: .* is unavailable: ." "$dir/out.txt" | cut -d: -f2 | sort -u | wc -l)
if [ "$found" -ne "$expected" ]; then
    cat "$dir/out.txt" >&2
    echo "carplaykit-unavailable-check: $found of $expected uses failed with the reason" >&2
    exit 1
fi
echo "carplaykit-unavailable-check: all $expected unavailable APIs fail to compile with their reason"
