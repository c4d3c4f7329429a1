// Package web holds the web app the server serves at /: a page to watch
// the agent work, browse and edit its workspace and open a terminal in
// its sandbox. Its sources are in web/src; package web/bundle builds them
// into web/dist, which is embedded here. A binary built without the
// bundle (a plain go build before make build) serves a page that says so.
package web

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Assets returns the bundled files: index.html and assets/*.
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path
	}
	return sub
}

// Built reports whether the binary holds the bundled app.
func Built() bool {
	_, err := fs.Stat(Assets(), "index.html")
	return err == nil
}
