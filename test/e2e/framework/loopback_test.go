package framework

import (
	"bufio"
	"net"
	"testing"
)

// A line sent through the forward comes back from the server behind it, and
// Close ends the connections it carries.
func TestLoopbackForwardCarriesConnectionsUntilClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					_, _ = c.Write([]byte("echo " + line))
				}
				_, _ = bufio.NewReader(c).ReadString('\n') // hold it open
			}()
		}
	}()
	fwd, err := ForwardLoopback(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()

	c, err := net.Dial("tcp", fwd.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	got, err := r.ReadString('\n')
	if err != nil || got != "echo hello\n" {
		t.Fatalf("got %q, %v through the forward, want the echo", got, err)
	}
	fwd.Close()
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("the connection outlived Close")
	}
	if c2, err := net.Dial("tcp", fwd.Addr); err == nil {
		c2.Close()
		t.Error("the forward still accepts connections after Close")
	}
}
