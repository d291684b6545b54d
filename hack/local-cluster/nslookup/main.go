// Command nslookup is a minimal replacement for busybox's nslookup applet in
// the local cluster's busybox image.
//
// Why: busybox nslookup sends the name exactly as given and ignores the
// "search" and "ndots" options of /etc/resolv.conf, so an init container that
// waits for "<pod>.<cluster>.<ns>.svc" (no cluster domain) never succeeds.
// Go's pure resolver (CGO_ENABLED=0) applies the search list like glibc does.
//
// Usage: nslookup NAME [SERVER]
// Exit status is 0 when NAME resolves to at least one address, 1 otherwise.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 || strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprintln(os.Stderr, "usage: nslookup NAME [SERVER]")
		os.Exit(2)
	}
	name := os.Args[1]

	resolver := &net.Resolver{PreferGo: true}
	server := "(from /etc/resolv.conf)"
	if len(os.Args) == 3 {
		// An explicit server replaces the resolv.conf nameservers; the search
		// list still applies.
		server = os.Args[2]
		if _, _, err := net.SplitHostPort(server); err != nil {
			server = net.JoinHostPort(server, "53")
		}
		resolver.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	addrs, err := resolver.LookupHost(ctx, name)
	if err != nil || len(addrs) == 0 {
		fmt.Fprintf(os.Stderr, "nslookup: can't resolve '%s': %v\n", name, err)
		os.Exit(1)
	}
	// The canonical name shows which search domain matched; it is only
	// informative, so a failure here is ignored.
	canonical, cerr := resolver.LookupCNAME(ctx, name)
	if cerr != nil || canonical == "" {
		canonical = name
	}

	fmt.Printf("Server:    %s\n\n", server)
	fmt.Printf("Name:      %s\n", strings.TrimSuffix(canonical, "."))
	for i, a := range addrs {
		fmt.Printf("Address %d: %s\n", i+1, a)
	}
}
