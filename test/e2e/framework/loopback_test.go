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

// DropConnections ends the connections the forward carries, as a network
// fault would, but the forward still carries the next one.
func TestLoopbackForwardDropsItsConnectionsAndCarriesNewOnes(t *testing.T) {
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
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte("echo " + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	fwd, err := ForwardLoopback(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	echo := func(c net.Conn, r *bufio.Reader) (string, error) {
		if _, err := c.Write([]byte("hello\n")); err != nil {
			return "", err
		}
		return r.ReadString('\n')
	}

	old, err := net.Dial("tcp", fwd.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldR := bufio.NewReader(old)
	if got, err := echo(old, oldR); err != nil || got != "echo hello\n" {
		t.Fatalf("got %q, %v through the forward, want the echo", got, err)
	}
	if n := fwd.DropConnections(); n != 1 {
		t.Errorf("DropConnections ended %d connections, want the 1 open", n)
	}
	if got, err := echo(old, oldR); err == nil {
		t.Errorf("the connection outlived DropConnections: got %q", got)
	}

	fresh, err := net.Dial("tcp", fwd.Addr)
	if err != nil {
		t.Fatalf("the forward refuses connections after DropConnections: %v", err)
	}
	defer fresh.Close()
	if got, err := echo(fresh, bufio.NewReader(fresh)); err != nil || got != "echo hello\n" {
		t.Errorf("got %q, %v through the forward after DropConnections, want the echo", got, err)
	}
}
