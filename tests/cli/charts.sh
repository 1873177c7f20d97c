# charts.sh - what the SVG charts must show (issue 19): one colour per
# category across the timeline and the address-space charts, round tick
# values, series that coincide still visible, infeasible budgets marked,
# and a peak callout that covers none of the curve. Read back from the SVG
# text with Python's own parser (xml.etree), not with remat's code.
C="$T/charts"
mkdir -p "$C"
svgpy() { /usr/bin/python3 -c "import sys, re, json, xml.etree.ElementTree as ET
N = '{http://www.w3.org/2000/svg}'
root = ET.parse(sys.argv[1]).getroot()
$1" "$2" ${3:+"$3"}; }

"$REMAT" trace graphs/transformer4.json --activation-budget 2.5MiB -o "$C/timeline.svg"
"$REMAT" alloc graphs/transformer4.json --svg "$C/alloc.svg" >/dev/null
"$REMAT" compare graphs/transformer4.json --sweep 12 --svg "$C/sweep.svg" >"$C/sweep.json"

# The legend colour of every category, in each chart: a swatch (rect)
# followed by its label (text).
legend='
out = {}
els = list(root.iter())
for i, e in enumerate(els):
    if e.tag == N + "text" and e.text:
        name = e.text.split()[0]
        for p in reversed(els[max(0, i - 3):i]):
            if p.tag == N + "rect" and p.get("fill", "").startswith("#") and p.get("width") in ("14", "14.0"):
                out[name] = p.get("fill"); break
print(json.dumps(out, sort_keys=True))'
svgpy "$legend" "$C/timeline.svg" >"$C/legend_timeline.json"
svgpy "$legend" "$C/alloc.svg" >"$C/legend_alloc.json"
expect charts_palette_one 0 "same colours" -- /usr/bin/python3 -c '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
shared = [k for k in a if k in b]
bad = [(k, a[k], b[k]) for k in shared if a[k] != b[k]]
print("same colours" if len(shared) >= 4 and not bad else (shared, bad))' "$C/legend_timeline.json" "$C/legend_alloc.json"

# Round ticks on the sweep: the y labels (N%) step by 1, 2 or 5 times a
# power of ten, from 0; the x labels (MiB) likewise.
ticks='
def labels(anchor, suffix):
    v = [t.text for t in root.iter(N + "text") if t.get("text-anchor") == anchor and t.text and re.fullmatch(r"-?[0-9.e+]+" + suffix, t.text)]
    return [float(x[:len(x) - len(suffix)] if suffix else x) for x in v]
def round_steps(v):
    d = [round(b - a, 9) for a, b in zip(v, v[1:])]
    if len(d) < 1 or len(set(d)) != 1: return False
    m = d[0] / 10 ** __import__("math").floor(__import__("math").log10(d[0]))
    return any(abs(m - r) < 1e-6 for r in (1, 2, 5)) and all(abs(x / d[0] - round(x / d[0])) < 1e-6 for x in v)
y, x = labels("end", "%"), labels("middle", "")
print("round" if round_steps(y) and y[0] == 0 and round_steps(x) else ("irregular ticks", y, x))'
expect charts_round_ticks 0 "round" -- svgpy "$ticks" "$C/sweep.svg"

# Coinciding series stay visible: every series has its own (dash, marker)
# style, and store-all, feasible at one budget only, still has a marker.
styles='
lines = [e for e in root.iter(N + "polyline")]
dash = set(e.get("stroke-dasharray", "") for e in lines)
store = [e for e in root.iter() if e.get("stroke") == "#1f77b4" and e.tag in (N + "circle",)]
print("visible" if len(dash) >= 5 and len(store) >= 2 else ("hidden", dash, len(store)))'
expect charts_series_visible 0 "visible" -- svgpy "$styles" "$C/sweep.svg"

# Infeasible budgets are marked: one cross per null in the sweep's JSON.
expect charts_infeasible_marked 0 "marked" -- sh -c "
    want=\$(/usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(sum(v is None for s in d[\"overhead\"].values() for v in s))' '$C/sweep.json')
    got=\$(grep -c 'l6 6M' '$C/sweep.svg')
    [ \"\$want\" -gt 0 ] && [ \"\$want\" = \"\$got\" ] && echo marked || echo \"crosses \$got, nulls \$want\""

# The peak callout (the rounded box) lies wholly above the curve: above
# the peak marker, which is the curve's highest point.
callout='
box = [e for e in root.iter(N + "rect") if e.get("rx") == "3"][0]
peak = [e for e in root.iter(N + "circle") if e.get("r") == "5"][0]
bottom = float(box.get("y")) + float(box.get("height"))
print("clear" if bottom < float(peak.get("cy")) - 5 else ("covers", bottom, peak.get("cy")))'
expect charts_callout_clear 0 "clear" -- svgpy "$callout" "$C/timeline.svg"
"$REMAT" trace graphs/resnet8.json -o "$C/timeline_r8.svg"
expect charts_callout_clear_resnet8 0 "clear" -- svgpy "$callout" "$C/timeline_r8.svg"
