"""Matplotlib figures as PNG bytes that depend on the data only."""
import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def png_bytes(figure: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG, without the "Software" chunk (the matplotlib version), so the same data
    give the same bytes."""
    buffer = io.BytesIO()
    FigureCanvasAgg(figure)
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()
