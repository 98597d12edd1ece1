package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromiumPath finds a headless-capable Chromium: $SPANPERF_CHROMIUM, else
// Debian's chromium (scripts/deps.sh installs it) or another common name.
func chromiumPath() string {
	if p := os.Getenv("SPANPERF_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// runChromium runs headless Chromium on url with extra flags and returns
// its stdout and stderr.
func runChromium(t *testing.T, bin string, extra ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir(),
		"--enable-logging=stderr", "--v=0"}
	cmd := exec.CommandContext(ctx, bin, append(args, extra...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, errb.String())
	}
	return out.String(), errb.String()
}

// TestHTMLInChromium opens reports of the recorded runs in headless
// Chromium: no console message (the page has no script, so any message is an
// error, such as a fetch the page's Content-Security-Policy blocked), every
// chart in the DOM with drawn elements, and a screenshot for a person to
// look at, in $TMPDIR/spanperf-html-report (the test logs the path).
func TestHTMLInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser; skipped with -short")
	}
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no chromium found (scripts/deps.sh installs Debian's chromium; SPANPERF_CHROMIUM names another)")
	}
	seeds, quick := loadTestRuns(t)
	outDir := filepath.Join(os.TempDir(), "spanperf-html-report")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("console check catches a fetch", func(t *testing.T) {
		// The check below must not pass vacuously: a page that tries to
		// load a remote image logs the blocked load to the console.
		doc := strings.Replace(renderHTML(t, []Run{quick}, Options{}), "<body>", `<body><img src="https://example.invalid/x.png" alt="">`, 1)
		page := filepath.Join(t.TempDir(), "fetch.html")
		if err := os.WriteFile(page, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr := runChromium(t, bin, "--dump-dom", "file://"+page)
		if !strings.Contains(stderr, ":CONSOLE") {
			t.Errorf("no console message for a blocked fetch; stderr:\n%s", stderr)
		}
	})
	for _, tc := range []struct {
		name   string
		runs   []Run
		height int
	}{
		{"seeds", []Run{seeds}, 8000},
		{"quick", []Run{quick}, 11000},
		{"lines", []Run{linesRun()}, 6000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := renderHTML(t, tc.runs, Options{})
			page := filepath.Join(outDir, tc.name+".html")
			if err := os.WriteFile(page, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			url := "file://" + page

			dom, stderr := runChromium(t, bin, "--dump-dom", url)
			for _, line := range strings.Split(stderr, "\n") {
				if strings.Contains(line, ":CONSOLE") {
					t.Errorf("console message: %s", line)
				}
			}
			if !strings.Contains(dom, "</html>") {
				t.Fatalf("no DOM dumped:\n%.500s\n%s", dom, stderr)
			}
			if got, want := strings.Count(dom, "<svg"), strings.Count(doc, "<svg"); got != want {
				t.Errorf("DOM has %d charts, the file %d", got, want)
			}
			checkHTML(t, dom)

			shot := filepath.Join(outDir, tc.name+".png")
			_ = os.Remove(shot)
			runChromium(t, bin, "--screenshot="+shot, "--window-size=1280,"+strconv.Itoa(tc.height), "--hide-scrollbars", url)
			f, err := os.Open(shot)
			if err != nil {
				t.Fatalf("no screenshot: %v", err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatalf("screenshot %s: %v", shot, err)
			}
			b := img.Bounds()
			coloured := 0
			for y := b.Min.Y; y < b.Max.Y; y += 4 {
				for x := b.Min.X; x < b.Max.X; x += 4 {
					r, g, bl, _ := img.At(x, y).RGBA()
					if !(r == g && g == bl) { // grey text and white page are not charts
						coloured++
					}
				}
			}
			if coloured < 1000 {
				t.Errorf("screenshot %s has almost no coloured pixels (%d): charts not drawn?", shot, coloured)
			}
			t.Logf("report %s, screenshot %s (%dx%d)", page, shot, b.Dx(), b.Dy())
		})
	}
}
