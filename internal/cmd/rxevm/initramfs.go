package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"
)

// cpioWriter writes an uncompressed "newc" cpio archive, the format the
// kernel unpacks as an initramfs. Errors stick: the first one is returned by
// close and every later call does nothing.
type cpioWriter struct {
	w   io.Writer
	ino uint32
	err error
}

func (c *cpioWriter) entry(name string, mode uint32, rdevMajor, rdevMinor uint32, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := uint32(1)
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		nlink = 2
	}
	// magic, then 13 eight-digit hex fields: ino, mode, uid, gid, nlink,
	// mtime, filesize, devmajor, devminor, rdevmajor, rdevminor, namesize
	// (with its NUL) and check (0 for newc). Name and data are each padded to
	// a multiple of 4 bytes, counted from the start of the entry.
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	var b bytes.Buffer
	b.WriteString(hdr)
	b.WriteString(name)
	b.WriteByte(0)
	b.Write(make([]byte, pad4(b.Len())))
	b.Write(data)
	b.Write(make([]byte, pad4(len(data))))
	_, c.err = c.w.Write(b.Bytes())
}

func pad4(n int) int { return (4 - n%4) % 4 }

func (c *cpioWriter) dir(name string) { c.entry(name, syscall.S_IFDIR|0o755, 0, 0, nil) }

func (c *cpioWriter) file(name string, perm uint32, data []byte) {
	c.entry(name, syscall.S_IFREG|perm, 0, 0, data)
}

func (c *cpioWriter) charDev(name string, perm, major, minor uint32) {
	c.entry(name, syscall.S_IFCHR|perm, major, minor, nil)
}

// close writes the trailer entry and reports the first error.
func (c *cpioWriter) close() error {
	c.entry("TRAILER!!!", 0, 0, 0, nil)
	return c.err
}

// writeInitramfs writes the guest's initramfs: busybox, the modules (by
// base name, in /lib/modules), /init and a /dev/console node, so that init
// has a console even before it mounts devtmpfs.
func writeInitramfs(w io.Writer, busybox string, modules []string, init string) error {
	c := &cpioWriter{w: w}
	for _, d := range []string{"bin", "dev", "host", "lib", "lib/modules", "proc", "sys"} {
		c.dir(d)
	}
	c.charDev("dev/console", 0o600, 5, 1)
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	c.file("bin/busybox", 0o755, bb)
	files := map[string]string{} // name in the archive -> host path
	for _, m := range modules {
		name := path.Join("lib/modules", filepath.Base(m))
		if prev, ok := files[name]; ok && prev != m {
			return fmt.Errorf("modules %s and %s have the same file name", prev, m)
		}
		files[name] = m
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		data, err := os.ReadFile(files[name])
		if err != nil {
			return err
		}
		c.file(name, 0o644, data)
	}
	c.file("init", 0o755, []byte(init))
	return c.close()
}
