package main

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/durawal/durawal/internal/measure"
)

// Charts are drawn with the Liberation Sans font that gonum/plot carries,
// embedded in the SVG and rasterised into the PNG, so they look the same
// on a machine without it. The layout also leaves room for a wider
// fallback font: legends sit inside generous margins and the caption is
// wrapped well short of the edge.

// palette is Okabe and Ito's colour-blind-safe set; each series also gets
// its own dash pattern and marker, so no series is told apart by colour
// alone.
var palette = []color.NRGBA{
	{0x00, 0x72, 0xB2, 0xff}, // blue
	{0xD5, 0x5E, 0x00, 0xff}, // vermillion
	{0x00, 0x9E, 0x73, 0xff}, // bluish green
	{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	{0xE6, 0x9F, 0x00, 0xff}, // orange
	{0x56, 0xB4, 0xE9, 0xff}, // sky blue
}

var dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)},
	{vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}, {vg.Points(4), vg.Points(4)}, {vg.Points(1), vg.Points(3)}}

var glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{},
	draw.PlusGlyph{}, draw.RingGlyph{}}

const (
	chartW   = 8 * vg.Inch
	plotH    = 4.6 * vg.Inch
	captionH = 1.15 * vg.Inch
)

func init() {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
}

// chart is one figure: the plot and the caption under it.
type chart struct {
	name    string // file name without extension
	p       *plot.Plot
	caption string
}

// writePlots writes the charts of whatever experiments ran into dir, each
// as SVG (fonts embedded) and PNG, and returns the paths written:
//
//	latency-percentiles-levels  levels 1, 2, 0 on one goroutine
//	latency-percentiles-aof     appendfsync always, everysec, no
//	commits-per-fsync           commits per fsync against committers (cliff)
//	p99                         p99 commit latency against committers (cliff)
func writePlots(dir string, rep *report) (paths []string, err error) {
	defer func() {
		if r := recover(); r != nil { // gonum/plot panics on some degenerate data
			err = fmt.Errorf("drawing charts: %v", r)
		}
	}()
	var charts []chart
	if rep.Levels != nil {
		n := rep.Levels.Single[0].first().Commits
		charts = append(charts, percentileChart("latency-percentiles-levels",
			fmt.Sprintf("Commit latency by percentile, %s commits on one goroutine", fmtInt(n)),
			rep.Levels.Single,
			fmt.Sprintf("Each line is one run of %s commits on one goroutine (the round whose p99 is the median of %d). "+
				"The x axis stretches the tail: each step right is ten times rarer. innodb=1 pays an fdatasync "+
				"on every commit, so its line sits at this disk's sync latency; levels 2 and 0 stay near memory speed "+
				"except for the rare commit whose write() or log-buffer flush meets the disk.", fmtInt(n), rep.Rounds)))
	}
	if rep.AOF != nil {
		var cells []*cell
		for _, w := range rep.AOF.Words {
			cells = append(cells, w.Sync)
		}
		n := cells[0].first().Commits
		charts = append(charts, percentileChart("latency-percentiles-aof",
			fmt.Sprintf("Commit latency by percentile, appendfsync, %s commits on one goroutine", fmtInt(n)),
			cells,
			fmt.Sprintf("Each line is one run of %s synchronous commits on one goroutine (the round whose p99 is the "+
				"median of %d). always waits for an fdatasync per commit; everysec and no return after the write(), "+
				"so their tails are rare commits whose write() waited for the disk or that were not scheduled; "+
				"the aof table says which.", fmtInt(n), rep.Rounds)))
	}
	if rep.Cliff != nil {
		charts = append(charts, cliffCharts(rep.Cliff, rep.Rounds)...)
	}
	for _, c := range charts {
		ps, err := saveChart(dir, c)
		if err != nil {
			return paths, err
		}
		paths = append(paths, ps...)
	}
	return paths, nil
}

// tailScale places a percentile p (a fraction) at −log10(1 − p): 50%, 90%,
// 99%, 99.9% and 99.99% are evenly spaced.
type tailScale struct{}

func (tailScale) Normalize(lo, hi, x float64) float64 {
	f := func(p float64) float64 { return -math.Log10(math.Max(1-p, 1e-9)) }
	return (f(x) - f(lo)) / (f(hi) - f(lo))
}

// percentileChart plots, for each cell, the representative round's latency
// against percentile, 50% to 99.99%, on a log latency axis.
func percentileChart(name, title string, cells []*cell, caption string) chart {
	p := newPlot(title, "percentile of commits (tail stretched: 50, 90, 99, 99.9, 99.99 %)", "commit latency (µs, log scale)")
	p.X.Scale = tailScale{}
	p.X.Min, p.X.Max = 0.5, 0.9999
	p.X.Tick.Marker = plot.ConstantTicks{{Value: 0.5, Label: "50%"}, {Value: 0.9, Label: "90%"}, {Value: 0.99, Label: "99%"},
		{Value: 0.999, Label: "99.9%"}, {Value: 0.9999, Label: "99.99%"}}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, c := range cells {
		r := medianRound(c, "p99_us")
		var xys plotter.XYs
		for _, pt := range r.Percentiles {
			if pt.Fraction >= 0.5 && pt.Fraction <= 0.9999 {
				xys = append(xys, plotter.XY{X: pt.Fraction, Y: math.Max(us(pt.Latency), 0.01)})
			}
		}
		if len(xys) == 0 {
			continue
		}
		for _, xy := range xys {
			lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		style(&l.LineStyle, i)
		p.Add(l)
		p.Legend.Add(c.Name, l)
	}
	decades(p, lo, hi)
	return chart{name: name, p: p, caption: caption}
}

// decades widens a log y axis to whole powers of ten around lo..hi, so
// that the lowest and highest lines sit on labelled ticks, not the edge.
func decades(p *plot.Plot, lo, hi float64) {
	if !(lo > 0 && hi >= lo) || math.IsInf(hi, 0) {
		return
	}
	first, last := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)+1e-9))
	p.Y.Min, p.Y.Max = math.Pow(10, float64(first)), math.Pow(10, float64(last))
	var ticks plot.ConstantTicks
	for e := first; e <= last; e++ {
		v := math.Pow(10, float64(e))
		label := fmtRate(v)
		if e < 0 {
			label = strconv.FormatFloat(v, 'f', -e, 64)
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
		for k := 2; k < 10 && e < last; k++ {
			ticks = append(ticks, plot.Tick{Value: float64(k) * v}) // minor, unlabelled
		}
	}
	p.Y.Tick.Marker = ticks
}

// medianRound returns the round whose figure is the median of the cell's.
func medianRound(c *cell, figure string) result {
	of := metricFunc(figure)
	rs := slices.Clone(c.Rounds)
	slices.SortFunc(rs, func(a, b result) int { return cmp.Compare(of(a), of(b)) })
	return rs[(len(rs)-1)/2]
}

// cliffCharts are commits per fsync and p99 against committers, medians
// with min–max bars.
func cliffCharts(c *cliffResult, rounds int) []chart {
	cpf := newPlot("Commits per fsync at innodb=1 (group commit)", "concurrent committers", "commits per fsync")
	cpf.X.Tick.Marker = committerTicks()
	cpf.X.Min, cpf.X.Max = 0, 34
	cpf.Y.Min = 0
	ideal := plotter.NewFunction(func(x float64) float64 { return x })
	ideal.Color = color.Gray{Y: 0x90}
	ideal.Width = vg.Points(3) // thick pale grey: unlike any series
	ideal.XMin, ideal.XMax = 1, 32
	cpf.Add(ideal)
	cpf.Legend.Add("y = x: every committer in one group", ideal)

	p99 := newPlot("p99 commit latency by committers", "concurrent committers", "p99 commit latency (µs, log scale)")
	p99.X.Tick.Marker = committerTicks()
	p99.X.Min, p99.X.Max = 0, 34
	p99.Y.Scale = plot.LogScale{}
	p99.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	maxCPF := 32.0
	lo99, hi99 := math.Inf(1), math.Inf(-1)
	for i, cfg := range c.Configs {
		off := (float64(i) - 1.5) * 0.35 // keep the bars of different settings apart
		if cfg.Name != "innodb=2" {      // at level 2 fsyncs are the flusher's, not the commits'
			addSpreadSeries(cpf, cfg.Name, cfg.Runs, "commits_per_fsync", off, i, false)
			for _, r := range cfg.Runs {
				maxCPF = math.Max(maxCPF, r.get("commits_per_fsync").Max)
			}
		}
		addSpreadSeries(p99, cfg.Name, cfg.Runs, "p99_us", off, i, true)
		for _, r := range cfg.Runs {
			sp := r.get("p99_us")
			lo99, hi99 = math.Min(lo99, math.Max(sp.Min, 0.01)), math.Max(hi99, sp.Max)
		}
	}
	decades(p99, lo99, hi99)
	cpf.Y.Max = maxCPF * 1.05
	cpf.Legend.Top, cpf.Legend.Left = true, true
	p99.Legend.Top, p99.Legend.Left = true, true
	n := c.PerCommitter
	return []chart{
		{name: "commits-per-fsync", p: cpf, caption: fmt.Sprintf("Median of %d interleaved rounds, bars from the lowest to the highest "+
			"round; each committer made %s commits at innodb=1. The thick grey y = x line is perfect sharing: one fsync for all "+
			"committers at once. A plain leader/follower queue settles into two cohorts that take turns (about half the line); "+
			"the adaptive wait and the group delay are meant to merge them.", rounds, fmtInt(n))},
		{name: "p99", p: p99, caption: fmt.Sprintf("p99 of each run's commits, median of %d interleaved rounds, bars from the "+
			"lowest to the highest round; %s commits per committer. Where bars of two settings overlap at one committer "+
			"count, this run does not tell them apart. innodb=2 waits for no fdatasync, only for its write() calls.", rounds, fmtInt(n))},
	}
}

// spreadXYs is a series of medians with asymmetric min–max error bars.
type spreadXYs struct {
	plotter.XYs
	lo, hi []float64
}

func (s spreadXYs) YError(i int) (float64, float64) { return s.lo[i], s.hi[i] }

// addSpreadSeries adds one setting's medians, line and points, with min–max
// bars, offset by off on the x axis.
func addSpreadSeries(p *plot.Plot, name string, cells []*cell, figure string, off float64, i int, logY bool) {
	var s spreadXYs
	for _, c := range cells {
		sp := c.get(figure)
		if sp.Median <= 0 && !logY {
			continue
		}
		floor := func(v float64) float64 {
			if logY {
				return math.Max(v, 0.01)
			}
			return v
		}
		s.XYs = append(s.XYs, plotter.XY{X: float64(c.first().Committers) + off, Y: floor(sp.Median)})
		s.lo = append(s.lo, floor(sp.Median)-floor(sp.Min))
		s.hi = append(s.hi, floor(sp.Max)-floor(sp.Median))
	}
	if len(s.XYs) == 0 {
		return
	}
	l, pts, err := plotter.NewLinePoints(s.XYs)
	if err != nil {
		return
	}
	style(&l.LineStyle, i)
	pts.GlyphStyle.Color = palette[i%len(palette)]
	pts.GlyphStyle.Shape = glyphs[i%len(glyphs)]
	pts.GlyphStyle.Radius = vg.Points(3)
	bars, err := plotter.NewYErrorBars(s)
	if err == nil {
		bars.LineStyle.Color = palette[i%len(palette)]
		bars.LineStyle.Width = vg.Points(1)
		p.Add(bars)
	}
	p.Add(l, pts)
	p.Legend.Add(name, l, pts)
}

// style gives series i its colour, width and dash pattern.
func style(ls *draw.LineStyle, i int) {
	ls.Color = palette[i%len(palette)]
	ls.Width = vg.Points(1.8)
	ls.Dashes = dashes[i%len(dashes)]
}

// committerTicks labels the x axis at the committer counts that were run.
func committerTicks() plot.ConstantTicks {
	var ticks plot.ConstantTicks
	for _, n := range cliffCommitters {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	return ticks
}

// newPlot returns a plot with a title, axis labels and a grid.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Padding = vg.Points(4)
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(8)
	p.Add(plotter.NewGrid())
	return p
}

// saveChart draws c with its caption below into NAME.svg (fonts embedded)
// and NAME.png, and returns both paths.
func saveChart(dir string, c chart) ([]string, error) {
	svgPath := filepath.Join(dir, c.name+".svg")
	pngPath := filepath.Join(dir, c.name+".png")
	svg := vgsvg.NewWith(vgsvg.UseWH(chartW, plotH+captionH), vgsvg.EmbedFonts(true))
	drawChart(draw.New(svg), c)
	if err := writeTo(svgPath, svg); err != nil {
		return nil, err
	}
	png := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(chartW, plotH+captionH), vgimg.UseDPI(120))}
	drawChart(draw.New(png), c)
	if err := writeTo(pngPath, png); err != nil {
		return nil, err
	}
	return []string{svgPath, pngPath}, nil
}

func writeTo(path string, w io.WriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// drawChart draws the plot in the upper part of dc and the wrapped caption
// in the lower part.
func drawChart(dc draw.Canvas, c chart) {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	pad := vg.Points(8) // keeps the title and the last tick label off the edges
	c.p.Draw(draw.Crop(dc, pad, -pad, captionH, -pad))
	sty := draw.TextStyle{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, vg.Points(10)),
		Handler: c.p.TextHandler,
	}
	margin := vg.Points(18)
	maxW := dc.Max.X - dc.Min.X - 2*margin - vg.Points(60) // room for a wider fallback font
	y := dc.Min.Y + captionH - vg.Points(14)
	for _, line := range wrap(c.caption, func(s string) vg.Length { return sty.Width(s) }, maxW) {
		dc.FillText(sty, vg.Point{X: dc.Min.X + margin, Y: y}, line)
		y -= vg.Points(13)
	}
}

// wrap breaks text into lines no wider than maxW.
func wrap(text string, width func(string) vg.Length, maxW vg.Length) []string {
	var lines []string
	var cur string
	for _, w := range strings.Fields(text) {
		next := w
		if cur != "" {
			next = cur + " " + w
		}
		if cur != "" && width(next) > maxW {
			lines = append(lines, cur)
			next = w
		}
		cur = next
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// percentileCurve returns latency at percentiles from 50% up to 99.99%
// (or as far as the sample count resolves), evenly spaced on the tail
// scale, from sorted samples.
func percentileCurve(sorted []time.Duration) []measure.Point {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	const steps = 80
	var pts []measure.Point
	for k := 0; k <= steps; k++ {
		tail := 0.5 * math.Pow(10, -float64(k)*math.Log10(5000)/steps) // 50% … 0.01% of commits above
		if tail*float64(n) < 1 {
			break
		}
		p := 1 - tail
		pts = append(pts, measure.Point{Latency: measure.Percentile(sorted, 100*p), Fraction: p})
	}
	return pts
}

// us returns d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
