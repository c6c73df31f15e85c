"""The PNG: GB/s against copy size, one line per implementation."""

from __future__ import annotations

MISSING = "--plot needs matplotlib, which is not installed: pip install matplotlib (or pip install 'et-copy[bench]')"


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _series(section: dict, prefix: str = "") -> dict[str, tuple[list[int], list[float], list[float], list[float]]]:
    series: dict[str, tuple[list[int], list[float], list[float], list[float]]] = {}
    for row in section["rows"]:
        n = row["nbytes"]
        for name, s in row["results"].items():
            xs, med, lo, hi = series.setdefault(prefix + name, ([], [], [], []))
            xs.append(n)
            med.append(n / s.median_ns)
            lo.append(n / s.p90_ns)  # the slow samples give the low GB/s
            hi.append(n / s.p10_ns)
    return series


def write_plot(doc: dict, path: str) -> None:
    """Writes the throughput (and CUDA) curves to ``path``; the band around
    each line is the p10..p90 spread of the samples."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ._throughput import size_label

    candidates = [("simulated device (this machine's host memory)", doc.get("throughput"))]
    if doc.get("cuda"):
        candidates.append((f"CUDA ({doc['cuda'].get('gpu', 'GPU')})", doc["cuda"]))
    panels = [(title, section) for title, section in candidates if section and section.get("rows")]
    fig, axes = plt.subplots(1, len(panels), figsize=(9 * len(panels), 6), squeeze=False)
    for ax, (title, section) in zip(axes[0], panels):
        for name, (xs, med, lo, hi) in _series(section).items():
            (line,) = ax.plot(xs, med, marker="o", markersize=4, label=name)
            ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        sizes = [row["nbytes"] for row in section["rows"]]
        ax.set_xticks(sizes)
        ax.set_xticklabels([size_label(n) for n in sizes], rotation=45, ha="right")
        ax.minorticks_off()
        ax.set_xlabel("bytes per copy")
        ax.set_ylabel("GB/s (1e9 bytes/s), median; band = p10..p90")
        ax.set_title(title)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    machine = doc["machine"]
    fig.suptitle(
        f"et_copy bench: {machine['cpu']}, {machine['usable_cpus']} CPUs, torch {machine['torch']}, "
        f"executorch {machine['executorch']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
