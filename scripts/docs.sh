#!/usr/bin/env bash
# Builds the documentation of the library products and checks it:
#   1. symbol graphs of NavigationCore, NavServer and NavigationClient, extracted from the debug
#      build's modules (`swift symbolgraph-extract`; run after `swift build`);
#   2. every public declaration has a `///` comment (a check of the symbol graphs' docComment);
#   3. `docc convert` of each module into a DocC archive, NavServer with its catalog
#      (Sources/NavServer/NavServer.docc: the article "Hosting your own feature"), warnings as
#      errors, so a broken symbol link fails too.
#
#   scripts/docs.sh [OUTPUT_DIR]     (default .build/docs; archives in OUTPUT_DIR/<Module>.doccarchive)
#
# Uses only the toolchain (swift, docc): no package plugin. Takes a few seconds.
set -Eeuo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

output=${1:-.build/docs}
modules=(NavigationCore NavServer NavigationClient)
bin=$(swift build --show-bin-path)
docc=$(command -v docc || echo "$(dirname "$(readlink -f "$(command -v swift)")")/docc")
[[ -x $docc ]] || { echo "FAIL: docc is not in the toolchain" >&2; exit 1; }
for module in "${modules[@]}"; do
    [[ -f $bin/Modules/$module.swiftmodule ]] || { echo "FAIL: $module is not built (swift build)" >&2; exit 1; }
done
rm -rf "$output"
mkdir -p "$output/symbol-graphs"

# The C modules NavServer imports, found as the build finds them.
includes=()
for directory in Sources/C*/ Sources/CNavdSystem/include; do includes+=(-I "$directory"); done
for flag in $(pkg-config --cflags-only-I libpq sqlite3 libcurl libcrypto); do includes+=(-Xcc "$flag"); done
target=$(swift -print-target-info | sed -n 's/^ *"triple": "\(.*\)",$/\1/p' | head -n 1)

echo "== symbol graphs"
for module in "${modules[@]}"; do
    mkdir -p "$output/symbol-graphs/$module"
    swift symbolgraph-extract -module-name "$module" -I "$bin/Modules" "${includes[@]}" \
        -Xcc -fmodule-map-file="$bin/CNavdSystem.build/module.modulemap" \
        -target "$target" -minimum-access-level public -output-dir "$output/symbol-graphs/$module"
done

echo "== every public declaration has a doc comment"
python3 - "$output/symbol-graphs" <<'PY'
import glob, json, sys
missing, total = [], 0
for path in sorted(glob.glob(f"{sys.argv[1]}/*/*.symbols.json")):
    for symbol in json.load(open(path))["symbols"]:
        name = symbol["pathComponents"][-1]
        # Compiler-made members (a memberwise `==`, a property wrapper's `$projection`) have no source to document.
        if "::SYNTHESIZED::" in symbol["identifier"]["precise"] or name.startswith("$"):
            continue
        if symbol["accessLevel"] not in ("public", "open"):
            continue
        total += 1
        lines = (symbol.get("docComment") or {}).get("lines", [])
        if not any(line["text"].strip() for line in lines):
            location = symbol.get("location", {})
            file = location.get("uri", "?").split("/Sources/")[-1]
            missing.append(f"  Sources/{file}:{location.get('position', {}).get('line', 0) + 1}: "
                           f"{'.'.join(symbol['pathComponents'])} ({symbol['kind']['displayName']})")
for line in missing:
    print(line)
if missing:
    print(f"FAIL: {len(missing)} of {total} public declarations have no /// comment")
    sys.exit(1)
print(f"  ok: {total} public declarations, each with a doc comment")
PY

echo "== docc convert"
for module in "${modules[@]}"; do
    catalog=()
    [[ -d Sources/$module/$module.docc ]] && catalog=("Sources/$module/$module.docc")
    "$docc" convert "${catalog[@]}" --additional-symbol-graph-dir "$output/symbol-graphs/$module" \
        --fallback-display-name "$module" --fallback-bundle-identifier "navd.$module" \
        --output-path "$output/$module.doccarchive" --warnings-as-errors \
        --disable-parameters-and-returns-validation >"$output/$module.log" 2>&1 \
        || { cat "$output/$module.log" >&2; echo "FAIL: docc convert $module" >&2; exit 1; }
done
[[ -f $output/NavServer.doccarchive/data/documentation/navserver/hostingyourownfeature.json ]] \
    || { echo "FAIL: the article \"Hosting your own feature\" is not in the NavServer archive" >&2; exit 1; }
echo "OK: documentation in $output/{$(IFS=,; echo "${modules[*]}")}.doccarchive"
