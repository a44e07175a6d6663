package main

import (
	"fmt"
	"math"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writePlots writes the SVG charts of whatever experiments ran into dir:
//
//	latency-cdf.svg        commit latency CDF per policy (one goroutine)
//	commits-per-fsync.svg  commits per fsync against committers (cliff)
//	p99.svg                p99 commit latency against committers (cliff)
func writePlots(dir string, rep *report) (err error) {
	defer func() {
		if r := recover(); r != nil { // gonum/plot panics on some degenerate data
			err = fmt.Errorf("drawing charts: %v", r)
		}
	}()
	var cdfs []any
	if rep.Levels != nil {
		for _, r := range rep.Levels.Single {
			cdfs = append(cdfs, r.Name, cdfXYs(r))
		}
	}
	if rep.AOF != nil {
		for _, w := range rep.AOF.Words {
			cdfs = append(cdfs, w.Sync.Name, cdfXYs(w.Sync))
		}
	}
	if len(cdfs) > 0 {
		p := newPlot("Commit latency CDF, one goroutine", "commit latency (µs, log scale)", "fraction of commits ≤ x")
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min, p.Y.Max = 0, 1
		p.Legend.Top, p.Legend.Left = false, false // the curves rise at the left and end at the top
		if err := plotutil.AddLines(p, cdfs...); err != nil {
			return err
		}
		if err := save(p, dir, "latency-cdf.svg"); err != nil {
			return err
		}
	}
	if rep.Cliff == nil {
		return nil
	}
	var cpf, p99 []any
	for _, cfg := range rep.Cliff.Configs {
		var a, b plotter.XYs
		for _, r := range cfg.Runs {
			if r.Fsyncs > 0 {
				a = append(a, plotter.XY{X: float64(r.Committers), Y: r.CommitsPerFsync})
			}
			b = append(b, plotter.XY{X: float64(r.Committers), Y: math.Max(us(r.Latency.P99), 0.001)})
		}
		if len(a) > 0 && cfg.Name != "innodb=2" { // at level 2 fsyncs are the flusher's, not the commits'
			cpf = append(cpf, cfg.Name, a)
		}
		p99 = append(p99, cfg.Name, b)
	}
	p := newPlot("Commits per fsync (group commit)", "concurrent committers", "commits per fsync")
	p.X.Tick.Marker = committerTicks()
	p.Y.Min = 0
	if err := plotutil.AddLinePoints(p, cpf...); err != nil {
		return err
	}
	if err := save(p, dir, "commits-per-fsync.svg"); err != nil {
		return err
	}
	p = newPlot("p99 commit latency", "concurrent committers", "p99 commit latency (µs, log scale)")
	p.X.Tick.Marker = committerTicks()
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	if err := plotutil.AddLinePoints(p, p99...); err != nil {
		return err
	}
	return save(p, dir, "p99.svg")
}

// committerTicks labels the x axis at the committer counts that were run.
func committerTicks() plot.ConstantTicks {
	var ticks plot.ConstantTicks
	for _, n := range cliffCommitters {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	return ticks
}

// newPlot returns a plot with a title, axis labels, a grid and the legend
// at the top left.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

func save(p *plot.Plot, dir, name string) error {
	return p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, name))
}

// cdfXYs returns r's latency CDF in µs.
func cdfXYs(r result) plotter.XYs {
	xys := make(plotter.XYs, 0, len(r.CDF))
	for _, pt := range r.CDF {
		xys = append(xys, plotter.XY{X: math.Max(us(pt.Latency), 0.001), Y: pt.Fraction})
	}
	return xys
}

// us returns d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
