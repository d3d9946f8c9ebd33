"""The one style every dmbench figure shares.

An approach keeps its colour, marker and paper label in every figure:

    key = series_key("onesided_mw", "sep")   # "onesided_mw/sep"
    color(key), marker(key), label(key)      # red, "o", "OneSidedMW(+Sep)"

Keys are "system" or "system/variant" as the runner spells them (variant
spellings are matched loosely: "type-1", "type_1" and "type1" are one variant).
A variant's sizes do not change its style ("rpc_mw/type1-1MB" is drawn as
"rpc_mw/type1", "onesided_mw/4KB" as "onesided_mw"; the label keeps the size).
An unknown variant of a known system gets a shade of the system's colour, an
unknown system a colour from a fallback palette; both are chosen from a CRC of
the key, so they are the same in every run and every figure. Two series of
one figure that would still look alike (same system, same marker) are told
apart by distinguish(), which sort_keys() calls: the later one in the papers'
order gets the next marker of a fixed cycle and another shade.

apply() sets the paper style; savefig() writes PNG (200 dpi) and PDF;
draw_paper() / paper_handles() mark the paper's stated values beside ours.
"""

import colorsys
import os
import re
import zlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

# Widths of a two-column paper (USENIX: 7.0 in text width, 3.33 in per column).
FULL_WIDTH_IN = 7.0
COLUMN_WIDTH_IN = 3.4

# Systems in the order the papers list them (figures sort series by this).
SYSTEM_ORDER = ["static_mr", "fine_mr", "rpc_mw", "finemem", "odrp", "onesided_mw"]

_SYSTEM_LABEL = {
    "static_mr": "Static-MR",
    "fine_mr": "Fine-MR",
    "rpc_mw": "RPC-MW",
    "finemem": "FineMem",
    "odrp": "ODRP",
    "onesided_mw": "OneSidedMW",
    # Primitive microbenchmarks (no system): MR registration and MW operations.
    "mr": "MR",
    "mw": "MW",
}

# (colour, marker) of the system itself (no variant) and of its known variants,
# by normalised variant (see _norm_variant). Okabe-Ito-like, colour-blind safe.
_STYLE = {
    "static_mr": ("#4d4d4d", "s"),
    "fine_mr": ("#a6761d", "v"),
    "fine_mr/1mb": ("#8c510a", "v"),
    "fine_mr/4mb": ("#d9a441", "v"),
    "rpc_mw": ("#0072b2", "^"),
    "rpc_mw/type1": ("#56b4e9", "^"),
    "rpc_mw/type2": ("#0072b2", "<"),
    "finemem": ("#009e73", "P"),
    "odrp": ("#e69f00", "X"),
    "onesided_mw": ("#d62728", "o"),
    "onesided_mw/nosep": ("#f28e8e", "h"),
    "onesided_mw/sep": ("#d62728", "o"),
    "mr": ("#4d4d4d", "s"),
    "mw": ("#0072b2", "^"),
    "mw/type1": ("#56b4e9", "^"),
    "mw/type2": ("#0072b2", "<"),
}

_VARIANT_LABEL = {
    "rpc_mw/type1": "RPC-MW(type-1)",
    "rpc_mw/type2": "RPC-MW(type-2)",
    "onesided_mw/nosep": "OneSidedMW",
    "onesided_mw/sep": "OneSidedMW(+Sep)",
    "mw/type1": "MW type-1",
    "mw/type2": "MW type-2",
}

# Unknown systems: colours not used above, markers in a fixed order.
_FALLBACK_COLORS = ["#cc79a7", "#7570b3", "#66a61e", "#e7298a", "#1b9e77", "#a6cee3",
                    "#b15928", "#6a3d9a", "#999999", "#17becf"]
_FALLBACK_MARKERS = ["d", "p", "*", ">", "8", "H", "1", "2"]

# The paper's stated values: a hollow black marker beside our bar or point.
PAPER_MARKER = "D"
PAPER_REL_MARKER = "^"
PAPER_LABEL = "paper"
PAPER_REL_LABEL = "paper ratio \u00d7 our baseline"

# Thread counts (or any second bar dimension): solid, then hatched and lighter.
HATCHES = ["", "////", "xxxx", "...."]


def _clean(v):
    """'' for None/NaN, else a stripped string."""
    if v is None:
        return ""
    if isinstance(v, float) and v != v:
        return ""
    s = str(v).strip()
    return "" if s.lower() == "nan" else s


def _norm_variant(v):
    return re.sub(r"[\s_\-]", "", _clean(v).lower())


def series_key(system, variant=""):
    """'system' or 'system/variant', e.g. series_key('onesided_mw', 'sep')."""
    s, v = _clean(system), _clean(variant)
    return f"{s}/{v}" if v else s


def _split(key):
    key = _clean(key)
    system, _, variant = key.partition("/")
    return system.lower(), variant


_SIZE_TOKEN = re.compile(r"\d+(?:\.\d+)?\s*[kmgt]?i?b", re.IGNORECASE)


def _variant_tokens(variant):
    """'type1-1MB' -> ['type1', '1MB']."""
    return [t for t in re.split(r"[-_,;\s/]+", _clean(variant)) if t]


def _is_size(tok):
    return bool(_SIZE_TOKEN.fullmatch(tok))


def _lookup(key):
    """The style entry of key: 'system/variant' when the variant (spelled
    loosely) is known, else with its sizes left out ('rpc_mw/type1-1MB' ->
    'rpc_mw/type1', 'onesided_mw/4KB' -> 'onesided_mw'), else the key itself
    ('onesided_mw/sep4lanes', not in the table: a shade of the system's style)."""
    system, variant = _split(key)
    if not variant:
        return system
    full = system + "/" + _norm_variant(variant)
    if full in _STYLE:
        return full
    rest = _norm_variant("".join(t for t in _variant_tokens(variant) if not _is_size(t)))
    if not rest:
        return system
    if f"{system}/{rest}" in _STYLE:
        return f"{system}/{rest}"
    return full


def _crc(key):
    return zlib.crc32(_clean(key).encode("utf-8"))


def _shade(hex_color, key):
    """A deterministic lighter or darker shade of hex_color for key."""
    r, g, b = mcolors.to_rgb(hex_color)
    h, light, s = colorsys.rgb_to_hls(r, g, b)
    steps = [-0.18, 0.14, -0.09, 0.22, 0.07]
    light = min(0.85, max(0.15, light + steps[_crc(key) % len(steps)]))
    return mcolors.to_hex(colorsys.hls_to_rgb(h, light, s))


def _default_style(key):
    """(colour, marker) of key before distinguish(): its table entry, else a
    CRC shade of its system's colour and the system's marker, else a
    fallback colour and marker."""
    k = _lookup(key)
    if k in _STYLE:
        return _STYLE[k]
    system, _ = _split(key)
    if system in _STYLE:
        return _shade(_STYLE[system][0], key), _STYLE[system][1]
    return (_FALLBACK_COLORS[_crc(key) % len(_FALLBACK_COLORS)],
            _FALLBACK_MARKERS[_crc(key) % len(_FALLBACK_MARKERS)])


# Styles distinguish() gave the keys of the figure being drawn: {key: (colour, marker)}.
_ASSIGNED = {}
# Markers for a variant whose system's marker another variant of the figure
# already has: none of a known system's, nor the paper's diamond.
_CYCLE_MARKERS = ["d", "p", "*", ">", "H", "8", "<", "v", "P", "X", "^", "s"]
# Lightness steps of the colour of the 1st, 2nd, ... such variant.
_CYCLE_SHADES = [-0.2, 0.17, -0.32, 0.27, -0.1]


def _shade_step(hex_color, i):
    r, g, b = mcolors.to_rgb(hex_color)
    h, light, s = colorsys.rgb_to_hls(r, g, b)
    light = min(0.85, max(0.12, light + _CYCLE_SHADES[i % len(_CYCLE_SHADES)]))
    return mcolors.to_hex(colorsys.hls_to_rgb(h, light, s))


def distinguish(keys):
    """Gives every series of one figure a style of its own. Variants of one
    system that would share a marker (unknown variants, or variants that
    differ only in a size: 'onesided_mw/8KB' and '/4KB'; a variant the table
    names keeps its own marker unless its whole style is another key's) or a
    colour hard to tell apart keep the first one's style (the table's
    approaches first, then in sort_keys() order); each later one gets the
    next unused marker of a fixed cycle and/or the first shade of its
    system's colour not close to one already used (an unknown variant beside
    others always takes such a shade, not its CRC one), so the same set of
    keys is styled the same in every run. sort_keys() calls
    it, so a figure that orders its keys with it needs nothing else."""
    keys = [k for k in dict.fromkeys(_clean(k) for k in keys) if k]
    for k in keys:
        _ASSIGNED.pop(k, None)
    by_system = {}
    # the table's approaches keep their style first, then unknown variants
    for k in sorted(_sorted(keys), key=lambda k: _lookup(k) not in _STYLE):
        by_system.setdefault(_split(k)[0], []).append(k)
    for group in by_system.values():
        used_markers, used_colors, used = set(), [], set()
        for k in group:
            col, mk = _default_style(k)
            # a variant of the table keeps its marker unless another key has
            # its whole style (fine_mr/1mb and /4mb: one marker, two colours)
            own = "/" in _lookup(k) and _lookup(k) in _STYLE
            new_col, new_mk = col, mk
            if (col, mk) in used or (mk in used_markers and not own):
                new_mk = next((m for m in _CYCLE_MARKERS if m not in used_markers), mk)
            if any(_close(col, u) for u in used_colors) or \
                    (used_colors and _lookup(k) not in _STYLE):
                base = _STYLE.get(_split(k)[0], (col,))[0]
                shades = [_shade_step(base, i) for i in range(len(_CYCLE_SHADES))]
                new_col = next((c for c in shades if not any(_close(c, u) for u in used_colors)),
                               shades[len(used_colors) % len(shades)])
            if (new_col, new_mk) != (col, mk):
                _ASSIGNED[k] = (new_col, new_mk)
            used_markers.add(new_mk)
            used_colors.append(new_col)
            used.add((new_col, new_mk))


def _close(c1, c2, tol=0.2):
    """Colours a reader could take for one (RGB distance below tol)."""
    a, b = mcolors.to_rgb(c1), mcolors.to_rgb(c2)
    return sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5 < tol


def color(key):
    k = _clean(key)
    return _ASSIGNED[k][0] if k in _ASSIGNED else _default_style(k)[0]


def marker(key):
    k = _clean(key)
    return _ASSIGNED[k][1] if k in _ASSIGNED else _default_style(k)[1]


def _pretty_size(v):
    """'1MB' -> '1 MB' (the papers' spelling); anything else unchanged."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B)", v, re.IGNORECASE)
    return f"{m.group(1)} {m.group(2).upper().replace('IB', 'iB')}" if m else v


def _pretty_token(v):
    """'1MB' -> '1 MB', '4lanes' -> '4 lanes'; anything else unchanged."""
    v = _pretty_size(v)
    return re.sub(r"^(\d+(?:\.\d+)?)([A-Za-z]{3,})$", r"\1 \2", v)


def _with_extras(base, extras):
    """'RPC-MW(type-1)', ['1MB'] -> 'RPC-MW(type-1, 1 MB)'."""
    if not extras:
        return base
    more = ", ".join(_pretty_token(t) for t in extras)
    return f"{base[:-1]}, {more})" if base.endswith(")") else f"{base}({more})"


def label(key):
    """The paper's name for a series key: 'rpc_mw/type1' -> 'RPC-MW(type-1)';
    what the name does not say is added in the brackets: 'rpc_mw/type1-1MB'
    -> 'RPC-MW(type-1, 1 MB)', 'onesided_mw/sep-4lanes' -> 'OneSidedMW(+Sep,
    4 lanes)', 'fine_mr/1MB' -> 'Fine-MR(1 MB)'."""
    system, variant = _split(key)
    base = _SYSTEM_LABEL.get(system, _clean(key).partition("/")[0])
    if not variant:
        return base
    full = f"{system}/{_norm_variant(variant)}"
    if full in _VARIANT_LABEL:
        return _VARIANT_LABEL[full]
    toks = _variant_tokens(variant)
    words = [i for i, t in enumerate(toks) if not _is_size(t)]
    # the longest leading run of words that names a known variant
    for n in range(len(words), 0, -1):
        k = f"{system}/{_norm_variant(''.join(toks[i] for i in words[:n]))}"
        if k in _VARIANT_LABEL:
            return _with_extras(_VARIANT_LABEL[k],
                                [t for i, t in enumerate(toks) if i not in words[:n]])
    return _with_extras(base, toks) if toks else base


def _rank(key):
    """Known systems first (papers' order), known variants, then sizes
    numerically and other words with their numbers in numeric order
    ('sep-4lanes' before 'sep-16lanes')."""
    system, variant = _split(key)
    known = system in SYSTEM_ORDER
    sys_rank = SYSTEM_ORDER.index(system) if known else len(SYSTEM_ORDER)
    vorder = {"": 0, "type1": 1, "type2": 2, "nosep": 1, "sep": 2}
    nv = _norm_variant(variant)
    # sizes in variants ("1MB" < "4MB") sort numerically
    m = re.match(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b", nv)
    size = float(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " ") if m else 0.0
    natural = tuple((0, float(t), "") if re.fullmatch(r"\d+(?:\.\d+)?", t) else (1, 0.0, t)
                    for t in re.findall(r"\d+(?:\.\d+)?|\D+", nv))
    return (sys_rank, system if not known else "", vorder.get(nv, 3), size, natural,
            _clean(key))


def _sorted(keys):
    return sorted(set(keys), key=_rank)


def sort_keys(keys):
    """Series keys in the papers' order: known systems first, then by name.
    Also gives them distinct styles (distinguish())."""
    out = _sorted(_clean(k) for k in keys)
    distinguish(out)
    return out


def lighten(c, amount=0.55):
    """Mix colour c with white (amount 0: c, 1: white)."""
    r, g, b = mcolors.to_rgb(c)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


def darken(c, amount=0.3):
    """Mix colour c with black."""
    r, g, b = mcolors.to_rgb(c)
    return (r * (1 - amount), g * (1 - amount), b * (1 - amount))


def bar_style(key, index):
    """Bar kwargs for series key and the index-th value of the second dimension
    (e.g. threads 1 -> 0, 24 -> 1): solid first, then hatched and lighter."""
    c = color(key)
    if index == 0:
        return dict(facecolor=c, edgecolor=darken(c), linewidth=0.5, hatch="")
    return dict(facecolor=lighten(c, 0.6), edgecolor=c, linewidth=0.6,
                hatch=HATCHES[min(index, len(HATCHES) - 1)])


def dim_handles(values, fmt="{} thread(s)"):
    """Legend patches for the second bar dimension (neutral grey)."""
    out = []
    for i, v in enumerate(values):
        st = bar_style("static_mr", i)
        st["facecolor"] = "#777777" if i == 0 else lighten("#777777", 0.6)
        st["edgecolor"] = "#444444"
        out.append(Patch(label=fmt.format(v), **st))
    return out


def _available_serif():
    from matplotlib import font_manager as fm
    have = {f.name for f in fm.fontManager.ttflist}
    wanted = ["Times New Roman", "Nimbus Roman", "TeX Gyre Termes", "STIXGeneral",
              "DejaVu Serif"]
    got = [f for f in wanted if f in have]
    return got or ["serif"]


def apply():
    """A clean paper style: serif text at 8 pt, light grid, thin spines."""
    plt.rcdefaults()
    fonts = _available_serif()
    plt.rcParams.update({
        "font.family": "serif",
        "font.serif": fonts,
        "mathtext.fontset": "stix" if "STIXGeneral" in fonts else "dejavuserif",
        "font.size": 8,
        "axes.titlesize": 8.5,
        "axes.labelsize": 8,
        "xtick.labelsize": 7,
        "ytick.labelsize": 7,
        "legend.fontsize": 7,
        "legend.frameon": False,
        "legend.handlelength": 1.6,
        "legend.columnspacing": 1.0,
        "axes.linewidth": 0.6,
        "axes.grid": True,
        "axes.axisbelow": True,
        "grid.color": "#dddddd",
        "grid.linewidth": 0.5,
        "grid.linestyle": "-",
        "xtick.major.width": 0.6,
        "ytick.major.width": 0.6,
        "xtick.minor.width": 0.4,
        "ytick.minor.width": 0.4,
        "lines.linewidth": 1.2,
        "lines.markersize": 4,
        "hatch.linewidth": 0.5,
        "errorbar.capsize": 2,
        "figure.dpi": 100,
        "savefig.dpi": 200,
        "savefig.bbox": "tight",
        "savefig.pad_inches": 0.03,
        "pdf.fonttype": 42,  # TrueType in the PDF: editable text, accepted by HotCRP
        "ps.fonttype": 42,
        "svg.hashsalt": "dmbench",
    })


def savefig(fig, out_base):
    """Writes out_base.png (200 dpi) and out_base.pdf; returns both paths.
    No timestamps in the files, so equal figures give equal bytes."""
    out_base = os.fspath(out_base)
    for ext in (".png", ".pdf"):
        if out_base.endswith(ext):
            out_base = out_base[: -len(ext)]
    d = os.path.dirname(out_base)
    if d:
        os.makedirs(d, exist_ok=True)
    png, pdf = out_base + ".png", out_base + ".pdf"
    fig.savefig(png, dpi=200, metadata={"Software": None})
    fig.savefig(pdf, metadata={"CreationDate": None, "ModDate": None, "Producer": None,
                               "Creator": None})
    plt.close(fig)
    return png, pdf


def draw_paper(ax, x, y, relative=False, size=5.0, zorder=6, color="black"):
    """Marks the paper's value y at x: a hollow diamond (absolute values) or a
    hollow triangle (a paper ratio applied to our own baseline), black, or
    in the colour of the series it belongs to where several share an x."""
    if y is None or not (y == y) or (ax.get_yscale() == "log" and y <= 0):
        return None
    return ax.plot([x], [y], linestyle="none", marker=PAPER_REL_MARKER if relative else
                   PAPER_MARKER, markersize=size, markerfacecolor="white",
                   markeredgecolor=color, markeredgewidth=0.9 if color == "black" else 1.2,
                   zorder=zorder)[0]


def paper_handles(absolute=True, relative=False):
    """Legend entries for draw_paper's markers."""
    out = []
    if absolute:
        out.append(Line2D([], [], linestyle="none", marker=PAPER_MARKER, markersize=5,
                          markerfacecolor="white", markeredgecolor="black",
                          markeredgewidth=0.9, label=PAPER_LABEL))
    if relative:
        out.append(Line2D([], [], linestyle="none", marker=PAPER_REL_MARKER, markersize=5,
                          markerfacecolor="white", markeredgecolor="black",
                          markeredgewidth=0.9, label=PAPER_REL_LABEL))
    return out


P99_COLOR = "#666666"


def p99_is_mean(mean, p99, rel=1e-9):
    """True when a series' p99 equals its mean at every point that has a p99
    (e.g. a deterministic latency): a p99 line would lie on the mean's, so
    the figures draw it once and say 'p99 = mean' instead of a second entry."""
    pairs = [(float(m), float(q)) for m, q in zip(mean, p99) if q == q]
    return bool(pairs) and all(m == m and abs(q - m) <= rel * max(abs(m), abs(q))
                               for m, q in pairs)


def p99_handle():
    return Line2D([], [], color=P99_COLOR, linewidth=0.6, linestyle=(0, (1.5, 1.0)),
                  marker="_", markersize=7, markeredgewidth=1.1, label="p99")


def seeds_handle(n):
    return Line2D([], [], color="black", linewidth=0.8, marker="|", markersize=5,
                  label=f"min\u2013max of {n} seeds")


def series_handle(key, with_marker=True, **kw):
    return Line2D([], [], color=color(key), marker=marker(key) if with_marker else None,
                  label=kw.pop("text", label(key)), **kw)


def no_data(ax, text="no data"):
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center",
            color="#888888", fontsize=8)


def draw_bar(ax, x, width, mean, p99=None, lo=None, hi=None, zorder=3, **barkw):
    """One bar at x of height mean, with p99 as a thin whisker ending in a dash
    and, when lo/hi (min/max over seeds) differ, a black error bar."""
    ok = lambda v: v is not None and v == v  # noqa: E731  (not NaN)
    if not ok(mean):
        return None
    bar = ax.bar([x], [mean], width=width, zorder=zorder, **barkw)
    if ok(p99) and p99 > 0:
        ax.vlines(x, min(mean, p99), max(mean, p99), colors=P99_COLOR, linewidth=0.6,
                  linestyles=(0, (1.5, 1.0)), zorder=zorder + 1)
        ax.hlines(p99, x - width * 0.3, x + width * 0.3, colors=P99_COLOR, linewidth=1.1,
                  zorder=zorder + 1)
    if ok(lo) and ok(hi) and hi > lo:
        ax.errorbar([x], [mean], yerr=[[mean - lo], [hi - mean]], fmt="none", ecolor="black",
                    elinewidth=0.8, capsize=1.8, capthick=0.8, zorder=zorder + 2)
    return bar
