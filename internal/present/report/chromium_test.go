package report

// The HTML report opened in a real headless Chromium (Debian's chromium
// package, installed by scripts/install-deps.sh): it renders, its charts are
// visible, and it makes no request to anywhere.

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: run scripts/install-deps.sh (apt-get install chromium)")
	return ""
}

// runChromium opens a file:// page headless, with name resolution disabled
// (nothing can be fetched even by mistake) and a network log. extra selects
// the output (--dump-dom or --screenshot=...). It returns stdout and the
// parsed network log.
func runChromium(t *testing.T, page string, extra ...string) (string, *netLog) {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "netlog.json")
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + filepath.Join(dir, "profile"),
		"--host-resolver-rules=MAP * ~NOTFOUND",
		"--log-net-log=" + logPath,
		"--hide-scrollbars", "--window-size=1200,2400"}
	args = append(args, extra...)
	args = append(args, "file://"+page)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromiumPath(t), args...)
	// Chromium forks helpers: give it its own process group and stop that
	// group (by the PID we started) if it hangs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(extra, " "), err, lastLines(stderr.String(), 15))
	}
	nl, err := readNetLog(logPath)
	if err != nil {
		t.Fatalf("chromium's network log: %v", err)
	}
	return stdout.String(), nl
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// netLog is the part of Chromium's --log-net-log JSON the test reads.
type netLog struct {
	Constants struct {
		LogEventTypes map[string]int `json:"logEventTypes"`
	} `json:"constants"`
	Events []struct {
		Type   int             `json:"type"`
		Params json.RawMessage `json:"params"`
	} `json:"events"`
}

func readNetLog(path string) (*netLog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var nl netLog
	if err := json.Unmarshal(b, &nl); err != nil {
		return nil, err
	}
	if len(nl.Events) == 0 {
		return nil, fmt.Errorf("%s has no events", path)
	}
	return &nl, nil
}

// pageRequests lists every URL the page asked the network stack for.
// Chromium's own background requests (update checks, network time,
// sign-in; all failing on the resolver rule) are made for no page: their
// initiator is "not an origin" and their isolation key is not the page's
// file:// site, so they are told apart and not counted.
func (nl *netLog) pageRequests() []string {
	start, ok := nl.Constants.LogEventTypes["URL_REQUEST_START_JOB"]
	if !ok {
		return []string{"(netlog without URL_REQUEST_START_JOB: cannot tell)"}
	}
	var urls []string
	for _, e := range nl.Events {
		if e.Type != start {
			continue
		}
		var p struct {
			URL           string `json:"url"`
			Initiator     string `json:"initiator"`
			IsolationKey  string `json:"network_isolation_key"`
			SiteForCookie string `json:"site_for_cookies"`
		}
		if json.Unmarshal(e.Params, &p) != nil {
			continue
		}
		browserOwn := p.Initiator == "not an origin" && !strings.Contains(p.IsolationKey, "file://") && !strings.Contains(p.SiteForCookie, "file://")
		// The END phase of an event has no URL.
		if p.URL == "" || browserOwn || strings.HasPrefix(p.URL, "file:") || strings.HasPrefix(p.URL, "data:") {
			continue
		}
		urls = append(urls, p.URL)
	}
	return urls
}

// externalRef finds markup that would load something from elsewhere.
var externalRef = regexp.MustCompile(`(?i)(?:\b(?:src|href|action|poster|srcset|xlink:href)\s*=\s*["']?\s*(?:https?:)?//)|(?:url\(\s*["']?\s*(?:https?:)?//)|@import|<script[^>]*\bsrc\s*=|<link\b|<iframe\b|<object\b|<embed\b`)

func TestHTMLInChromium(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(dir, loadFixture(t), ""); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if m := externalRef.FindAllString(string(html), -1); len(m) > 0 {
		t.Errorf("report.html refers to outside resources: %q", m)
	}
	if strings.Contains(string(html), "http://") || strings.Contains(string(html), "https://") {
		t.Error("report.html contains an http(s):// URL")
	}

	// 1. It renders: the DOM after loading has the tables and the charts.
	dom, nl := runChromium(t, page, "--dump-dom")
	for _, want := range []string{`<h2 id="test-tcp_stream">`, `<h2 id="test-tcp_rr">`, `<table class="cells">`, `<table class="seed">`, `<h2 id="cpu">`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	if n := strings.Count(dom, "<svg"); n != 4 {
		t.Errorf("rendered DOM has %d <svg> charts, want 4 (2 tests + 2 CPU)", n)
	}
	if n := strings.Count(dom, `class="bar"`); n < 20 {
		t.Errorf("rendered DOM has %d bars, want the 22 of the fixture", n)
	}
	if reqs := nl.pageRequests(); len(reqs) > 0 {
		t.Errorf("loading the report asked the network for %q", reqs)
	}

	// 2. The charts are visible: a screenshot holds the bar colours.
	shot := filepath.Join(dir, "shot.png")
	_, nl = runChromium(t, page, "--screenshot="+shot)
	img := readPNG(t, shot)
	if n := countColor(img, palette[0], 12); n < 5000 {
		t.Errorf("screenshot has %d pixels of the first bar colour: charts not visible", n)
	}
	if n := countColor(img, palette[1], 12); n < 1000 {
		t.Errorf("screenshot has %d pixels of the second bar colour", n)
	}
	if reqs := nl.pageRequests(); len(reqs) > 0 {
		t.Errorf("rendering the report asked the network for %q", reqs)
	}
	if keep := os.Getenv("VNETLAB_KEEP_SCREENSHOT"); keep != "" {
		copyFile(t, shot, keep)
		t.Logf("screenshot kept at %s", keep)
	}
}

// The two checks above can fail: a page with outside resources is caught
// by both the markup scan and the network log.
func TestExternalRequestIsDetected(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "bad.html")
	// .invalid never resolves (RFC 2606), and the resolver rule maps every name to nothing.
	bad := `<!DOCTYPE html><html><head><link rel="stylesheet" href="https://fonts.vnetlab-test.invalid/a.css"></head>` +
		`<body><p>x</p><img src="http://cdn.vnetlab-test.invalid/x.png"></body></html>`
	if err := os.WriteFile(page, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := strings.Join(externalRef.FindAllString(bad, -1), " "); !strings.Contains(m, "<link") || !strings.Contains(m, `src="http://`) {
		t.Errorf("markup scan found %q, want the link and the img", m)
	}
	_, nl := runChromium(t, page, "--dump-dom")
	reqs := strings.Join(nl.pageRequests(), " ")
	for _, want := range []string{"http://cdn.vnetlab-test.invalid/x.png", "https://fonts.vnetlab-test.invalid/a.css"} {
		if !strings.Contains(reqs, want) {
			t.Errorf("network log check missed %s (found %q)", want, reqs)
		}
	}
}

func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// countColor counts pixels within tol (per channel) of a #rrggbb colour.
func countColor(img image.Image, hex string, tol int) int {
	want := [3]int{}
	for i := range want {
		v, _ := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		want[i] = int(v)
	}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			got := [3]int{int(r >> 8), int(g >> 8), int(bl >> 8)}
			ok := true
			for i := range got {
				if d := got[i] - want[i]; d > tol || d < -tol {
					ok = false
				}
			}
			if ok {
				n++
			}
		}
	}
	return n
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
}
