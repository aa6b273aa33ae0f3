"""soak.png for tools/dev/soak.py: RSS (MiB) and open fds over time, one
line per process, written with zlib alone (no plotting library on a minimal
machine). Labels use a 3x5 pixel font (upper case) drawn at twice its size."""
import struct
import zlib

WIDTH, HEIGHT = 960, 590
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP = 70, 150, 20
PANEL_HEIGHT, PANEL_GAP = 230, 50
COLORS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (255, 127, 14), (148, 103, 189),
          (140, 86, 75), (227, 119, 194), (127, 127, 127)]
GRID = (225, 225, 225)
AXIS = (0, 0, 0)
WARMUP = (245, 245, 200)

# 3x5 glyphs (upper case; text is drawn upper-cased), rows top to bottom.
FONT = {
    'A': '.#.#.#####.##.#',
    'B': '##.#.###.#.###.',
    'C': '.###..#..#...##',
    'D': '##.#.##.##.###.',
    'E': '####..##.#..###',
    'F': '####..##.#..#..',
    'G': '.###..#.##.#.##',
    'H': '#.##.#####.##.#',
    'I': '###.#..#..#.###',
    'K': '#.##.###.#.##.#',
    'L': '#..#..#..#..###',
    'M': '#.########.##.#',
    'N': '##.#.##.##.##.#',
    'O': '.#.#.##.##.#.#.',
    'P': '##.#.###.#..#..',
    'R': '##.#.###.#.##.#',
    'S': '.###...#...###.',
    'T': '###.#..#..#..#.',
    'U': '#.##.##.##.####',
    'V': '#.##.##.##.#.#.',
    'W': '#.##.########.#',
    'X': '#.##.#.#.#.##.#',
    'Y': '#.##.#.#..#..#.',
    'Z': '###..#.#.#..###',
    '0': '####.##.##.####',
    '1': '.#.##..#..#.###',
    '2': '##...#.#.#..###',
    '3': '##...#.#...###.',
    '4': '#.##.####..#..#',
    '5': '####..##...###.',
    '6': '.###..####.####',
    '7': '###..#.#..#..#.',
    '8': '####.#####.####',
    '9': '####.####..###.',
    '.': '.............#.',
    '-': '......###......',
    '(': '..#.#..#..#...#',
    ')': '#...#..#..#.#..',
    ':': '....#.....#....',
    ' ': '...............',
}

class Canvas:
    def __init__(self, width, height):
        self.width, self.height = width, height
        self.pixels = bytearray(b'\xff' * (width * height * 3))

    def set(self, x, y, color):
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i:i + 3] = bytes(color)

    def rect(self, x0, y0, x1, y1, color):
        for y in range(max(0, y0), min(self.height, y1)):
            for x in range(max(0, x0), min(self.width, x1)):
                self.set(x, y, color)

    def line(self, x0, y0, x1, y1, color, thick=2):
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for s in range(steps + 1):
            x = round(x0 + (x1 - x0) * s / steps)
            y = round(y0 + (y1 - y0) * s / steps)
            for dx in range(thick):
                for dy in range(thick):
                    self.set(x + dx, y + dy, color)

    def text(self, x, y, string, color=AXIS, scale=2):
        for ch in string.upper():
            glyph = FONT.get(ch, FONT[' '])
            for row in range(5):
                for col in range(3):
                    if glyph[row * 3 + col] == '#':
                        self.rect(x + col * scale, y + row * scale, x + (col + 1) * scale,
                                  y + (row + 1) * scale, color)
            x += 4 * scale
        return x

    def png(self):
        raw = b''.join(b'\x00' + bytes(self.pixels[y * self.width * 3:(y + 1) * self.width * 3])
                       for y in range(self.height))

        def chunk(kind, data):
            body = kind + data
            return struct.pack('>I', len(data)) + body + struct.pack('>I', zlib.crc32(body))

        header = struct.pack('>IIBBBBB', self.width, self.height, 8, 2, 0, 0, 0)
        return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', header) +
                chunk(b'IDAT', zlib.compress(raw, 9)) + chunk(b'IEND', b''))


def nice_step(span, ticks=5):
    raw = span / ticks if span > 0 else 1
    magnitude = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1
    for m in (1, 2, 5, 10):
        if raw <= m * magnitude:
            return m * magnitude
    return 10 * magnitude


def fmt(value):
    return str(int(value)) if value == int(value) else f'{value:.1f}'


def panel(canvas, top, title, series, pick, t_max, warmup):
    left, right = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
    bottom = top + PANEL_HEIGHT
    values = [pick(p) for points in series.values() for p in points]
    lo, hi = (min(values), max(values)) if values else (0, 1)
    lo = 0 if lo >= 0 else lo
    step = nice_step(hi - lo)
    hi = (int(hi / step) + 1) * step
    warm_x = left + int((right - left) * min(warmup, t_max) / t_max)
    canvas.rect(left, top, warm_x, bottom, WARMUP)
    y_value = lo
    while y_value <= hi + 1e-9:
        y = bottom - int((y_value - lo) / (hi - lo) * PANEL_HEIGHT)
        canvas.line(left, y, right, y, GRID, thick=1)
        label = fmt(y_value)
        canvas.text(left - 8 - 8 * len(label), y - 5, label)
        y_value += step
    t_step = nice_step(t_max, 8)
    t = 0.0
    while t <= t_max + 1e-9:
        x = left + int((right - left) * t / t_max)
        canvas.line(x, bottom, x, bottom + 4, AXIS, thick=1)
        label = fmt(t)
        canvas.text(x - 4 * len(label), bottom + 8, label)
        t += t_step
    canvas.line(left, top, left, bottom, AXIS, thick=1)
    canvas.line(left, bottom, right, bottom, AXIS, thick=1)
    canvas.text(left, top - 14, title)
    for i, (name, points) in enumerate(sorted(series.items())):
        color = COLORS[i % len(COLORS)]
        previous = None
        for p in points:
            x = left + int((right - left) * p[0] / t_max)
            y = bottom - int((pick(p) - lo) / (hi - lo) * PANEL_HEIGHT)
            if previous is not None:
                canvas.line(previous[0], previous[1], x, y, color)
            previous = (x, y)


def write_plot(path, series, warmup):
    """series: process name -> [(t_s, rss_kb, fds)]; the warm-up is shaded."""
    canvas = Canvas(WIDTH, HEIGHT)
    t_max = max((p[0] for points in series.values() for p in points), default=1.0) or 1.0
    panel(canvas, MARGIN_TOP + 10, 'rss (mib)', series, lambda p: p[1] / 1024, t_max, warmup)
    panel(canvas, MARGIN_TOP + 10 + PANEL_HEIGHT + PANEL_GAP, 'open fds', series,
          lambda p: p[2], t_max, warmup)
    canvas.text(WIDTH // 2 - 32, HEIGHT - 16, 'time (s)')
    legend_x = WIDTH - MARGIN_RIGHT + 16
    for i, name in enumerate(sorted(series)):
        y = MARGIN_TOP + 20 + i * 20
        canvas.rect(legend_x, y, legend_x + 12, y + 10, COLORS[i % len(COLORS)])
        canvas.text(legend_x + 18, y, name)
    with open(path, 'wb') as f:
        f.write(canvas.png())
