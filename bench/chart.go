package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart geometry.
const (
	_chartWidth  = 12 * vg.Inch
	_panelHeight = 4.6 * vg.Inch
	_legendWidth = 3.3 * vg.Inch
	_chartDPI    = 110
)

// WriteChart draws the report's throughput to the file at path: one panel
// per writer count, median MB/s (log scale) of every verified strategy
// against record size (log scale), with the buffered and O_DIRECT ceilings
// as horizontal lines. The format follows the file's extension: .svg or
// .png.
func (r *Report) WriteChart(path string) (err error) {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("chart %s: unknown format %q: use .svg or .png", path, ext)
	}
	var buf bytes.Buffer
	if err := r.renderChart(&buf, ext == ".png"); err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}

// renderChart writes the chart as SVG or PNG to w.
func (r *Report) renderChart(w io.Writer, png bool) (err error) {
	// The plotting library panics on some degenerate inputs; a chart is
	// never worth crashing a benchmark that already ran.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("drawing failed: %v", p)
		}
	}()
	writers := r.Writers
	if len(writers) == 0 {
		return fmt.Errorf("no writer counts in the report")
	}
	height := _panelHeight * vg.Length(len(writers))
	var (
		canvas vg.CanvasWriterTo
		vc     vg.CanvasSizer
	)
	if png {
		c := vgimg.NewWith(vgimg.UseWH(_chartWidth, height), vgimg.UseDPI(_chartDPI), vgimg.UseBackgroundColor(color.White))
		canvas, vc = vgimg.PngCanvas{Canvas: c}, c
	} else {
		c := vgsvg.New(_chartWidth, height)
		canvas, vc = c, c
	}
	dc := draw.New(vc)
	for i, wc := range writers {
		top := dc.Max.Y - _panelHeight*vg.Length(i)
		panel := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: dc.Min.X, Y: top - _panelHeight},
			Max: vg.Point{X: dc.Max.X, Y: top},
		}}
		p, leg, err := r.panel(wc)
		if err != nil {
			return err
		}
		plotArea := panel
		plotArea.Max.X -= _legendWidth
		plotArea.Max.Y -= vg.Points(8)
		plotArea.Min.Y += vg.Points(6)
		legArea := panel
		legArea.Min.X = panel.Max.X - _legendWidth
		legArea.Max.Y -= vg.Points(30)
		p.Draw(plotArea)
		leg.Draw(legArea)
	}
	_, err = canvas.WriteTo(w)
	return err
}

// panel builds the plot and legend for one writer count.
func (r *Report) panel(writers int) (*plot.Plot, plot.Legend, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%d %s: median throughput by record size (MB = 10^6 bytes; both axes log scale)", writers, plural(writers, "writer", "writers"))
	p.X.Label.Text = "record size (bytes)"
	p.Y.Label.Text = "MB/s"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var ticks []plot.Tick
	for _, s := range r.Sizes {
		ticks = append(ticks, plot.Tick{Value: float64(s), Label: formatSize(s)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Add(plotter.NewGrid())
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = vg.Points(9)

	minX, maxX := float64(r.Sizes[0]), float64(r.Sizes[len(r.Sizes)-1])
	minY, maxY := math.Inf(1), 0.0
	for i, name := range r.Strategies {
		var pts plotter.XYs
		for _, res := range r.Results {
			if res.Strategy == name && res.Writers == writers && res.Status == StatusOK && res.MBPerSec.Median > 0 {
				pts = append(pts, plotter.XY{X: float64(res.RecordSize), Y: res.MBPerSec.Median})
				minY, maxY = math.Min(minY, res.MBPerSec.Median), math.Max(maxY, res.MBPerSec.Median)
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, leg, err
		}
		col := chartColor(i)
		line.Color, line.Width = col, vg.Points(1.5)
		if i >= 10 {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		points.Color, points.Shape, points.Radius = col, chartShape(i), vg.Points(3)
		p.Add(line, points)
		leg.Add(fmt.Sprintf("%s (%s)", name, kindOf(r.Results, name)), line, points)
	}
	for _, c := range []struct {
		name   string
		v      float64
		dashed bool
	}{
		{"buffered ceiling", r.Ceiling.Buffered.Median, false},
		{"O_DIRECT ceiling", r.Ceiling.Direct.Median, true},
	} {
		if c.v <= 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: minX / 2, Y: c.v}, {X: maxX * 2, Y: c.v}})
		if err != nil {
			return nil, leg, err
		}
		l.Color, l.Width = color.Gray{Y: 40}, vg.Points(2.5)
		if c.dashed {
			l.Dashes = []vg.Length{vg.Points(8), vg.Points(4)}
		}
		p.Add(l)
		leg.Add(fmt.Sprintf("%s (%s writes) %s MB/s", c.name, formatSize(r.Ceiling.WriteSize), num(c.v)), l)
		minY, maxY = math.Min(minY, c.v), math.Max(maxY, c.v)
	}
	if maxY == 0 {
		minY, maxY = 1, 10 // nothing to show: an empty panel with a sane axis
	}
	p.X.Min, p.X.Max = minX/2, maxX*2
	p.Y.Min, p.Y.Max = minY/2, maxY*2
	return p, leg, nil
}

func kindOf(results []Result, name string) string {
	for _, r := range results {
		if r.Strategy == name {
			return r.Kind.String()
		}
	}
	return ""
}

// chartColor returns the i-th of 13 distinguishable colors.
func chartColor(i int) color.Color {
	p := [...]color.RGBA{
		{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
		{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
		{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff}, {0x00, 0x00, 0x80, 0xff}, {0x80, 0x00, 0x00, 0xff},
		{0x00, 0x64, 0x00, 0xff},
	}
	return p[i%len(p)]
}

// chartShape returns the i-th point shape.
func chartShape(i int) draw.GlyphDrawer {
	switch i % 6 {
	case 0:
		return draw.CircleGlyph{}
	case 1:
		return draw.SquareGlyph{}
	case 2:
		return draw.TriangleGlyph{}
	case 3:
		return draw.RingGlyph{}
	case 4:
		return draw.BoxGlyph{}
	default:
		return draw.PyramidGlyph{}
	}
}
