package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// busybox cpio, the tool the prototype built initramfs images with, is the
// independent reader here: it must list and unpack what cpioWriter wrote.
func requireBusybox(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not found: install busybox-static (rxevm -setup-only does) to check the initramfs format")
	}
	return bb
}

func TestWriteInitramfs(t *testing.T) {
	bb := requireBusybox(t)
	dir := t.TempDir()
	// Sizes 0 to 6 cover every padding case.
	var modules []string
	for i, body := range []string{"", "1", "22", "333", "4444", "55555", "666666"} {
		m := filepath.Join(dir, "kernel", string(rune('a'+i))+".ko")
		os.MkdirAll(filepath.Dir(m), 0o755)
		if err := os.WriteFile(m, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		modules = append(modules, m)
	}
	const init = "#!/bin/busybox sh\necho hello\n"
	var archive bytes.Buffer
	if err := writeInitramfs(&archive, bb, modules, init); err != nil {
		t.Fatal(err)
	}
	if archive.Len()%4 != 0 {
		t.Errorf("archive is %d bytes, not a multiple of 4", archive.Len())
	}

	list := exec.Command(bb, "cpio", "-t", "-v")
	list.Stdin = bytes.NewReader(archive.Bytes())
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("busybox cpio -t: %v\n%s", err, out)
	}
	for _, want := range []string{
		"drwxr-xr-x", " bin\n", " lib/modules\n", " host\n",
		"crw-------", " dev/console\n",
		"-rwxr-xr-x", " bin/busybox\n", " init\n",
		" lib/modules/a.ko\n", " lib/modules/g.ko\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("archive listing lacks %q:\n%s", want, out)
		}
	}

	// Unpack (everything but the device node, which needs mknod) and
	// compare contents.
	unpacked := t.TempDir()
	unpack := exec.Command(bb, "cpio", "-i", "-d", "init", "bin/busybox", "lib/modules/*")
	unpack.Dir = unpacked
	unpack.Stdin = bytes.NewReader(archive.Bytes())
	if out, err := unpack.CombinedOutput(); err != nil {
		t.Fatalf("busybox cpio -i: %v\n%s", err, out)
	}
	check := func(name string, want []byte) {
		got, err := os.ReadFile(filepath.Join(unpacked, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: got %d bytes (%v), want %d", name, len(got), err, len(want))
		}
	}
	check("init", []byte(init))
	for _, m := range modules {
		body, _ := os.ReadFile(m)
		check("lib/modules/"+filepath.Base(m), body)
	}
	bbBody, _ := os.ReadFile(bb)
	check("bin/busybox", bbBody)
}

func TestWriteInitramfsRejectsSameName(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a", "x.ko"), filepath.Join(dir, "b", "x.ko")
	for _, p := range []string{a, b} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
	}
	bb := filepath.Join(dir, "busybox")
	os.WriteFile(bb, nil, 0o755)
	var archive bytes.Buffer
	if err := writeInitramfs(&archive, bb, []string{a, b}, ""); err == nil {
		t.Error("two modules named x.ko went into one /lib/modules")
	}
}
