// Command cmd bundles the web app into web/dist, the files the agentbox
// binary embeds: `go run ./web/bundle/cmd` from the module root (make
// build runs it). Flags name other folders.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/web/bundle"
)

func main() {
	src := flag.String("src", "web/src", "the web app's sources")
	modules := flag.String("modules", ".cache/web/node_modules", "its npm packages (make cli installs them)")
	out := flag.String("out", "web/dist", "the output folder, which package web embeds")
	flag.Parse()
	files, err := bundle.Build(bundle.Options{Src: *src, NodeModules: *modules})
	if err == nil {
		err = bundle.Write(files, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var total int
	for _, f := range files {
		total += len(f.Data)
		fmt.Printf("%s/%s\t%d bytes\n", filepath.ToSlash(*out), f.Path, len(f.Data))
	}
	fmt.Printf("web app bundled: %d files, %d bytes\n", len(files), total)
}
