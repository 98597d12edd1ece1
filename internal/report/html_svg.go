package report

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// This file draws the HTML report's charts as inline SVG: plain elements
// with fixed coordinates, so they render without JavaScript or fonts.

// palette colours series in the order they are listed (colour-blind safe
// Okabe-Ito, then a few extra).
var palette = []string{
	"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
	"#F0E442", "#000000", "#999999", "#7f3c8d", "#11a579", "#3969ac",
}

func colour(i int) string { return palette[i%len(palette)] }

// point is one value of a series, with an optional interval around it.
type point struct {
	x, y   float64
	lo, hi float64
	hasCI  bool
}

// lineSeries is one line of a line chart.
type lineSeries struct {
	name   string
	colour string
	points []point
	dashed bool
	// noMarkers draws the line without a dot at each point (dense curves).
	noMarkers bool
}

// axis maps values to pixels, linearly or on a log scale (base 10).
type axis struct {
	min, max float64
	log      bool
	p0, p1   float64 // pixel positions of min and max
}

func (a axis) at(v float64) float64 {
	if a.log {
		v, lmin, lmax := math.Log10(math.Max(v, a.min)), math.Log10(a.min), math.Log10(a.max)
		return a.p0 + (v-lmin)/(lmax-lmin)*(a.p1-a.p0)
	}
	if a.max == a.min {
		return a.p0
	}
	return a.p0 + (v-a.min)/(a.max-a.min)*(a.p1-a.p0)
}

// niceTicks returns about n round values covering [lo, hi], and the
// range they span.
func niceTicks(lo, hi float64, n int) (ticks []float64, min, max float64) {
	if hi <= lo {
		if hi == 0 {
			hi = 1
		} else {
			lo, hi = math.Min(0, lo), hi+math.Abs(hi)*0.1
		}
	}
	step := niceNum((hi - lo) / float64(n))
	min = math.Floor(lo/step) * step
	max = math.Ceil(hi/step) * step
	for v := min; v <= max+step/2; v += step {
		ticks = append(ticks, math.Round(v/step)*step)
	}
	return ticks, min, max
}

func niceNum(x float64) float64 {
	exp := math.Floor(math.Log10(x))
	f := x / math.Pow(10, exp)
	var nf float64
	switch {
	case f <= 1:
		nf = 1
	case f <= 2:
		nf = 2
	case f <= 5:
		nf = 5
	default:
		nf = 10
	}
	return nf * math.Pow(10, exp)
}

// svgDoc accumulates one <svg> element.
type svgDoc struct {
	b    strings.Builder
	w, h int
}

func newSVG(w, h int, title string) *svgDoc {
	d := &svgDoc{w: w, h: h}
	fmt.Fprintf(&d.b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, w, h, esc(title))
	fmt.Fprintf(&d.b, `<title>%s</title>`, esc(title))
	return d
}

func (d *svgDoc) raw(format string, args ...any) { fmt.Fprintf(&d.b, format, args...) }

func (d *svgDoc) text(x, y float64, anchor, class, s string) {
	fmt.Fprintf(&d.b, `<text x="%s" y="%s" text-anchor="%s" class="%s">%s</text>`, f1(x), f1(y), anchor, class, esc(s))
}

func (d *svgDoc) line(x1, y1, x2, y2 float64, style string) {
	fmt.Fprintf(&d.b, `<line x1="%s" y1="%s" x2="%s" y2="%s" %s/>`, f1(x1), f1(y1), f1(x2), f1(y2), style)
}

func (d *svgDoc) html() template.HTML {
	d.b.WriteString("</svg>")
	return template.HTML(d.b.String()) // #nosec: every text was escaped by esc
}

func esc(s string) string { return html.EscapeString(s) }

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// legend draws the series names in a row below the plot, wrapping.
func (d *svgDoc) legend(x, y float64, names, colours []string, maxW float64) float64 {
	cx, cy := x, y
	for i, n := range names {
		w := 18 + 6.5*float64(len([]rune(n))) + 14
		if cx+w > x+maxW && cx > x {
			cx, cy = x, cy+16
		}
		d.raw(`<rect x="%s" y="%s" width="12" height="10" fill="%s"/>`, f1(cx), f1(cy-9), colours[i])
		d.text(cx+16, cy, "start", "lg", n)
		cx += w
	}
	return cy
}

// legendHeight is the height legend needs for names in width maxW.
func legendHeight(names []string, maxW float64) float64 {
	cx, rows := 0.0, 1
	for _, n := range names {
		w := 18 + 6.5*float64(len([]rune(n))) + 14
		if cx+w > maxW && cx > 0 {
			cx, rows = 0, rows+1
		}
		cx += w
	}
	return float64(rows) * 16
}

// lineChartSpec describes a line chart with optional error bars.
type lineChartSpec struct {
	title          string
	xLabel, yLabel string
	xLog, yLog     bool
	// xFmt and yFmt render tick values.
	xFmt, yFmt func(float64) string
	// xTicks, when set, are the x ticks to draw (else chosen).
	xTicks []float64
	series []lineSeries
	width  int
}

// lineChart draws spec; it returns "" when no series has a point.
func lineChart(spec lineChartSpec) template.HTML {
	var xs, ys []float64
	for _, s := range spec.series {
		for _, p := range s.points {
			xs = append(xs, p.x)
			ys = append(ys, p.y)
			if p.hasCI {
				ys = append(ys, p.lo, p.hi)
			}
		}
	}
	if len(xs) == 0 {
		return ""
	}
	w := spec.width
	if w == 0 {
		w = 640
	}
	names, colours := seriesLegend(spec.series)
	left, right, top := 78.0, 20.0, 28.0
	lh := legendHeight(names, float64(w)-left-right)
	plotH := 240.0
	h := top + plotH + 54 + lh
	d := newSVG(w, int(h), spec.title)
	d.text(float64(w)/2, 16, "middle", "t", spec.title)

	xa := axis{p0: left, p1: float64(w) - right, log: spec.xLog}
	ya := axis{p0: top + plotH, p1: top, log: spec.yLog}
	xmin, xmax := minMax(xs)
	ymin, ymax := minMax(ys)
	var xticks, yticks []float64
	if spec.xLog {
		xa.min, xa.max = logBounds(xmin, xmax)
		xticks = logTicks(xa.min, xa.max)
	} else {
		xticks, xa.min, xa.max = niceTicks(math.Min(0, xmin), xmax, 6)
	}
	if spec.xTicks != nil {
		xticks = spec.xTicks
		if spec.xLog {
			// Pad the data range instead of widening it to whole decades.
			xa.min, xa.max = xmin/1.3, xmax*1.3
		}
	}
	if spec.yLog {
		ya.min, ya.max = logBounds(ymin, ymax)
		yticks = logTicks(ya.min, ya.max)
	} else {
		yticks, ya.min, ya.max = niceTicks(math.Min(0, ymin), ymax, 5)
	}
	d.frame(xa, ya, xticks, yticks, spec.xFmt, spec.yFmt, spec.xLabel, spec.yLabel)

	for si, s := range spec.series {
		var pts []string
		for _, p := range s.points {
			pts = append(pts, f1(xa.at(p.x))+","+f1(ya.at(p.y)))
		}
		// Shift each series' error bars a little so that equal x values do
		// not hide one another.
		dodge := (float64(si) - float64(len(spec.series)-1)/2) * 3
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="5,3"`
		}
		d.raw(`<polyline class="series" points="%s" fill="none" stroke="%s" stroke-width="2"%s><title>%s</title></polyline>`, strings.Join(pts, " "), s.colour, dash, esc(s.name))
		for _, p := range s.points {
			x, y := xa.at(p.x), ya.at(p.y)
			if p.hasCI {
				y0, y1, cx := ya.at(p.lo), ya.at(p.hi), x+dodge
				d.line(cx, y0, cx, y1, `stroke="`+s.colour+`" stroke-width="1.5"`)
				d.line(cx-4, y0, cx+4, y0, `stroke="`+s.colour+`" stroke-width="1.5"`)
				d.line(cx-4, y1, cx+4, y1, `stroke="`+s.colour+`" stroke-width="1.5"`)
			}
			if !s.noMarkers {
				d.raw(`<circle cx="%s" cy="%s" r="3" fill="%s"/>`, f1(x), f1(y), s.colour)
			}
		}
	}
	d.legend(left, top+plotH+56, names, colours, float64(w)-left-right)
	return d.html()
}

func seriesLegend(ss []lineSeries) (names, colours []string) {
	for _, s := range ss {
		names = append(names, s.name)
		colours = append(colours, s.colour)
	}
	return names, colours
}

// frame draws the axes, gridlines, ticks and axis labels.
func (d *svgDoc) frame(xa, ya axis, xticks, yticks []float64, xFmt, yFmt func(float64) string, xLabel, yLabel string) {
	for _, t := range yticks {
		if t < ya.min-1e-12*math.Abs(ya.min) || t > ya.max+1e-12*math.Abs(ya.max) {
			continue
		}
		y := ya.at(t)
		d.line(xa.p0, y, xa.p1, y, `class="grid"`)
		d.text(xa.p0-6, y+4, "end", "tick", yFmt(t))
	}
	for _, t := range xticks {
		if t < xa.min || t > xa.max {
			continue
		}
		x := xa.at(t)
		d.line(x, ya.p0, x, ya.p0+5, `class="axis"`)
		d.text(x, ya.p0+18, "middle", "tick", xFmt(t))
	}
	d.line(xa.p0, ya.p0, xa.p1, ya.p0, `class="axis"`)
	d.line(xa.p0, ya.p0, xa.p0, ya.p1, `class="axis"`)
	d.text((xa.p0+xa.p1)/2, ya.p0+34, "middle", "al", xLabel)
	d.raw(`<text x="14" y="%s" text-anchor="middle" class="al" transform="rotate(-90 14 %s)">%s</text>`, f1((ya.p0+ya.p1)/2), f1((ya.p0+ya.p1)/2), esc(yLabel))
}

func minMax(v []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	if math.IsInf(lo, 1) {
		return 0, 1
	}
	return lo, hi
}

// logBounds widens [lo, hi] (lo > 0 assumed; else a tiny positive) to powers of ten.
func logBounds(lo, hi float64) (float64, float64) {
	if lo <= 0 {
		lo = hi / 1000
	}
	if hi <= 0 {
		hi, lo = 1, 0.1
	}
	a, b := math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if a == b {
		b *= 10
	}
	return a, b
}

// logTicks returns the powers of ten in [lo, hi], with 2 and 5 multiples when
// the range spans fewer than three decades.
func logTicks(lo, hi float64) []float64 {
	var out []float64
	decades := math.Log10(hi / lo)
	for p := math.Floor(math.Log10(lo)); p <= math.Ceil(math.Log10(hi)); p++ {
		base := math.Pow(10, p)
		mults := []float64{1}
		if decades < 3 {
			mults = []float64{1, 2, 5}
		}
		for _, m := range mults {
			if v := base * m; v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
				out = append(out, v)
			}
		}
	}
	return out
}

// barGroup is one category of a bar chart: a bar per series.
type barGroup struct {
	label string
	bars  []bar
}

// bar is one bar; stacked charts use segments instead of value.
type bar struct {
	series string
	value  float64
	lo, hi float64
	hasCI  bool
	// missing draws no bar and a "–" mark.
	missing bool
	// segments stack from zero up (stacked charts only).
	segments []segment
	note     string // shown above the bar, e.g. "est."
}

type segment struct {
	name  string
	value float64
}

// barChartSpec describes a grouped (or stacked) bar chart.
type barChartSpec struct {
	title  string
	yLabel string
	yFmt   func(float64) string
	groups []barGroup
	// seriesNames and seriesColours are the legend, in order; bars take the
	// colour of their series (segments the colour of their segment name).
	seriesNames   []string
	seriesColours []string
	stacked       bool
	width         int
}

// barChart draws spec; it returns "" when there is no bar.
func barChart(spec barChartSpec) template.HTML {
	var vals []float64
	nbars := 0
	for _, g := range spec.groups {
		for _, b := range g.bars {
			if b.missing {
				continue
			}
			nbars++
			if spec.stacked {
				sum := 0.0
				for _, s := range b.segments {
					sum += s.value
				}
				vals = append(vals, sum)
				continue
			}
			vals = append(vals, b.value)
			if b.hasCI {
				vals = append(vals, b.lo, b.hi)
			}
		}
	}
	if nbars == 0 {
		return ""
	}
	colourOf := map[string]string{}
	for i, n := range spec.seriesNames {
		colourOf[n] = spec.seriesColours[i]
	}
	maxBars := 0
	for _, g := range spec.groups {
		maxBars = max(maxBars, len(g.bars))
	}
	w := spec.width
	if w == 0 {
		w = max(480, min(1200, 90+len(spec.groups)*(maxBars*16+30)))
	}
	left, right, top, plotH := 78.0, 16.0, 28.0, 220.0
	lh := legendHeight(spec.seriesNames, float64(w)-left-right)
	labelH := 40.0
	h := top + plotH + labelH + lh + 8
	d := newSVG(w, int(h), spec.title)
	d.text(float64(w)/2, 16, "middle", "t", spec.title)
	lo, hi := minMax(vals)
	yticks, ymin, ymax := niceTicks(math.Min(0, lo), math.Max(0, hi), 5)
	ya := axis{min: ymin, max: ymax, p0: top + plotH, p1: top}
	xa := axis{min: 0, max: 1, p0: left, p1: float64(w) - right}
	for _, t := range yticks {
		y := ya.at(t)
		d.line(xa.p0, y, xa.p1, y, `class="grid"`)
		d.text(xa.p0-6, y+4, "end", "tick", spec.yFmt(t))
	}
	zero := ya.at(0)
	gw := (xa.p1 - xa.p0) / float64(len(spec.groups))
	for gi, g := range spec.groups {
		gx := xa.p0 + float64(gi)*gw
		bw := math.Min(28, (gw-12)/float64(max(1, len(g.bars))))
		start := gx + (gw-bw*float64(len(g.bars)))/2
		for bi, b := range g.bars {
			x := start + float64(bi)*bw
			c := colourOf[b.series]
			if b.missing {
				d.text(x+bw/2, zero-4, "middle", "tick", "–")
				continue
			}
			if spec.stacked {
				acc := 0.0
				for _, s := range b.segments {
					y0, y1 := ya.at(acc), ya.at(acc+s.value)
					d.raw(`<rect class="bar" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s · %s: %s</title></rect>`,
						f1(x+1), f1(y1), f1(bw-2), f1(math.Max(0.5, y0-y1)), colourOf[s.name], esc(b.series), esc(s.name), esc(spec.yFmt(s.value)))
					acc += s.value
				}
				if b.note != "" {
					d.text(x+bw/2, ya.at(acc)-4, "middle", "note", b.note)
				}
				continue
			}
			y := ya.at(b.value)
			top, hgt := math.Min(y, zero), math.Abs(zero-y)
			d.raw(`<rect class="bar" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s: %s</title></rect>`,
				f1(x+1), f1(top), f1(bw-2), f1(math.Max(0.5, hgt)), c, esc(b.series), esc(spec.yFmt(b.value)))
			if b.hasCI {
				y0, y1 := ya.at(b.lo), ya.at(b.hi)
				cx := x + bw/2
				d.line(cx, y0, cx, y1, `stroke="#333" stroke-width="1.2"`)
				d.line(cx-3, y0, cx+3, y0, `stroke="#333" stroke-width="1.2"`)
				d.line(cx-3, y1, cx+3, y1, `stroke="#333" stroke-width="1.2"`)
			}
			if b.note != "" {
				ny := math.Min(y, zero)
				if b.hasCI {
					ny = math.Min(ny, ya.at(b.hi))
				}
				d.text(x+bw/2, ny-4, "middle", "note", b.note)
			}
		}
		d.text(gx+gw/2, ya.p0+16, "middle", "tick", truncLabel(g.label, int(gw/6)))
	}
	d.line(xa.p0, zero, xa.p1, zero, `class="axis"`)
	d.line(xa.p0, ya.p0, xa.p0, ya.p1, `class="axis"`)
	d.raw(`<text x="14" y="%s" text-anchor="middle" class="al" transform="rotate(-90 14 %s)">%s</text>`, f1(top+plotH/2), f1(top+plotH/2), esc(spec.yLabel))
	d.legend(left, top+plotH+labelH, spec.seriesNames, spec.seriesColours, float64(w)-left-right)
	return d.html()
}

func truncLabel(s string, n int) string {
	r := []rune(s)
	if n < 4 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// radarSpec is a radar chart: one polygon per series over axes scaled 0–1.
type radarSpec struct {
	title  string
	axes   []string
	series []radarSeries
}

type radarSeries struct {
	name   string
	colour string
	// values are in [0, 1], one per axis; NaN is drawn at 0 with a gap mark.
	values []float64
}

// radar draws spec; it returns "" with fewer than three axes.
func radar(spec radarSpec) template.HTML {
	n := len(spec.axes)
	if n < 3 || len(spec.series) == 0 {
		return ""
	}
	w := 560.0
	names, colours := []string{}, []string{}
	for _, s := range spec.series {
		names, colours = append(names, s.name), append(colours, s.colour)
	}
	lh := legendHeight(names, w-40)
	r := 170.0
	cx, cy := w/2, 40+r+30
	h := cy + r + 50 + lh
	d := newSVG(int(w), int(h), spec.title)
	d.text(w/2, 16, "middle", "t", spec.title)
	ang := func(i int) float64 { return -math.Pi/2 + 2*math.Pi*float64(i)/float64(n) }
	for _, lvl := range []float64{0.25, 0.5, 0.75, 1} {
		var pts []string
		for i := range n {
			pts = append(pts, f1(cx+r*lvl*math.Cos(ang(i)))+","+f1(cy+r*lvl*math.Sin(ang(i))))
		}
		d.raw(`<polygon points="%s" fill="none" class="grid"/>`, strings.Join(pts, " "))
	}
	d.text(cx+3, cy-r*0.5-2, "start", "tick", "0.5")
	d.text(cx+3, cy-r-2, "start", "tick", "1")
	for i, a := range spec.axes {
		x, y := cx+r*math.Cos(ang(i)), cy+r*math.Sin(ang(i))
		d.line(cx, cy, x, y, `class="axis"`)
		lx, ly := cx+(r+14)*math.Cos(ang(i)), cy+(r+14)*math.Sin(ang(i))
		anchor := "middle"
		if math.Cos(ang(i)) > 0.2 {
			anchor = "start"
		} else if math.Cos(ang(i)) < -0.2 {
			anchor = "end"
		}
		d.text(lx, ly+4, anchor, "tick", a)
	}
	for _, s := range spec.series {
		var pts []string
		for i, v := range s.values {
			if math.IsNaN(v) {
				v = 0
			}
			pts = append(pts, f1(cx+r*v*math.Cos(ang(i)))+","+f1(cy+r*v*math.Sin(ang(i))))
		}
		d.raw(`<polygon class="series" points="%s" fill="%s" fill-opacity="0.12" stroke="%s" stroke-width="2"><title>%s</title></polygon>`,
			strings.Join(pts, " "), s.colour, s.colour, esc(s.name))
	}
	d.legend(20, cy+r+44, names, colours, w-40)
	return d.html()
}

// sparkline draws a small chart of a few series (one per trial) without
// axes other than the value range.
func sparkline(title string, series []lineSeries, yFmt func(float64) string) template.HTML {
	var ys []float64
	maxLen := 0
	for _, s := range series {
		for _, p := range s.points {
			ys = append(ys, p.y)
		}
		maxLen = max(maxLen, len(s.points))
	}
	if len(ys) == 0 {
		return ""
	}
	w, h := 250.0, 92.0
	left, right, top, bottom := 70.0, 6.0, 18.0, 16.0
	d := newSVG(int(w), int(h), title)
	d.text(4, 12, "start", "st", title)
	lo, hi := minMax(ys)
	_, ymin, ymax := niceTicks(math.Min(0, lo), hi, 2)
	ya := axis{min: ymin, max: ymax, p0: h - bottom, p1: top}
	xa := axis{min: 0, max: math.Max(1, float64(maxLen-1)), p0: left, p1: w - right}
	d.line(left, ya.p0, w-right, ya.p0, `class="axis"`)
	d.line(left, ya.p0, left, ya.p1, `class="axis"`)
	d.text(left-3, ya.p1+8, "end", "tick", yFmt(ymax))
	d.text(left-3, ya.p0, "end", "tick", yFmt(ymin))
	d.text(w-right, h-3, "end", "tick", strconv.Itoa(maxLen)+" s")
	for _, s := range series {
		var pts []string
		for _, p := range s.points {
			pts = append(pts, f1(xa.at(p.x))+","+f1(ya.at(p.y)))
		}
		if len(pts) == 1 {
			p := s.points[0]
			d.raw(`<circle class="series" cx="%s" cy="%s" r="2.5" fill="%s"><title>%s</title></circle>`, f1(xa.at(p.x)), f1(ya.at(p.y)), s.colour, esc(s.name))
			continue
		}
		d.raw(`<polyline class="series" points="%s" fill="none" stroke="%s" stroke-width="1.5"><title>%s</title></polyline>`, strings.Join(pts, " "), s.colour, esc(s.name))
	}
	return d.html()
}
