package egress

import (
	"io"
	"net/http"
	"strconv"
)

// This file keeps secret values out of what comes back into the sandbox:
// a Scrubber finds a value in the encodings a host may echo it in and
// overwrites it, in place and in the same encoding, with as many '*' as the
// value has bytes. The length of the text never changes, so a response's
// Content-Length stays true and a body can be scrubbed as it streams.
//
// The encodings (one layer of each, letters in any case):
//   - the value itself, each byte also as %HH (URL encoding), \u00HH
//     (JSON), \xHH, &#xHH; or &#DDD; (HTML), and '/' as \/ (JSON);
//   - hex: the value's bytes as two hex digits each;
//   - base64, standard or URL alphabet, padded or not, at each of the three
//     alignments the value can have inside a longer encoded text (Basic
//     credentials "user:value", a JSON document in base64): the characters
//     that carry bits of the value, including the two at its edges that
//     carry some bits of their neighbours (those bits are kept).
//
// Not recognised: an encoding applied twice, base64 broken into lines,
// UTF-16, any transformation beyond these (reversal, encryption,
// compression inside a body), or a value split across responses.

// MinSecretLen is the shortest secret value accepted: a shorter value could
// not be told from ordinary text in what comes back.
const MinSecretLen = 8

// scrubFill replaces each byte of a value.
const scrubFill = '*'

// altKind is how one unit of a pattern was written.
type altKind uint8

const (
	altLiteral   altKind = iota // the byte itself
	altPercent                  // %HH
	altUnicode                  // \u00HH
	altHexEscape                // \xHH
	altHTMLHex                  // &#xHH;
	altHTMLDec                  // &#DD; or &#DDD;
	altSlash                    // \/
	altHex                      // HH
	altBase64                   // one base64 character
)

// alt is one way a unit may be written: its text in lower case.
type alt struct {
	text string
	kind altKind
}

// pattern is one encoding of one value: a unit per byte (or per base64
// character), each with the texts it may take.
type pattern struct {
	units [][]alt
	// first has, per unit, the bytes (either case) its alternatives start
	// with: most positions are ruled out without looking further.
	first []byteSet
	// For base64: the value's first bit and its length in bits, relative to
	// the first character of the pattern.
	b64       bool
	bit, bits int
}

// byteSet is a set of bytes.
type byteSet [4]uint64

func (b *byteSet) add(c byte)      { b[c>>6] |= 1 << (c & 63) }
func (b *byteSet) has(c byte) bool { return b[c>>6]&(1<<(c&63)) != 0 }

// Scrubber finds secret values in text. It is immutable and safe for
// concurrent use.
type Scrubber struct {
	pats  []*pattern
	start byteSet // bytes a match can start with
	// pairs has the first two bytes a match can start with (bit
	// b0<<8|b1): a position is looked at only when its two bytes are one.
	pairs *[1024]uint64
}

func (s *Scrubber) addPair(a, b byte) {
	for _, x := range []byte{a, upper(a)} {
		for _, y := range []byte{b, upper(b)} {
			i := int(x)<<8 | int(y)
			s.pairs[i>>6] |= 1 << (i & 63)
		}
	}
}

// NewScrubber returns a scrubber for values (each at least MinSecretLen
// bytes; shorter ones and duplicates are ignored).
func NewScrubber(values ...string) *Scrubber {
	s := &Scrubber{}
	seen := map[string]bool{}
	for _, v := range values {
		if len(v) < MinSecretLen || seen[v] {
			continue
		}
		seen[v] = true
		s.pats = append(s.pats, textPattern(v), hexPattern(v))
		for a := range 3 {
			s.pats = append(s.pats, base64Pattern(v, a))
		}
	}
	for _, p := range s.pats {
		p.first = make([]byteSet, len(p.units))
		for u, alts := range p.units {
			for _, a := range alts {
				p.first[u].add(a.text[0])
				p.first[u].add(upper(a.text[0]))
			}
		}
		for c := range 256 {
			if p.first[0].has(byte(c)) {
				s.start.add(byte(c))
			}
		}
	}
	s.pairs = new([1024]uint64)
	for _, p := range s.pats {
		for _, a := range p.units[0] {
			if len(a.text) > 1 {
				s.addPair(a.text[0], a.text[1])
				continue
			}
			for _, b := range p.units[1] {
				s.addPair(a.text[0], b.text[0])
			}
		}
	}
	return s
}

// Empty reports whether the scrubber has nothing to find.
func (s *Scrubber) Empty() bool { return s == nil || len(s.pats) == 0 }

const hexDigits = "0123456789abcdef"

func hex2(b byte) string { return string([]byte{hexDigits[b>>4], hexDigits[b&15]}) }

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// textPattern is v as itself and with its bytes escaped.
func textPattern(v string) *pattern {
	p := &pattern{}
	for i := 0; i < len(v); i++ {
		b := v[i]
		alts := []alt{{string(lower(b)), altLiteral}, {"%" + hex2(b), altPercent}, {`\x` + hex2(b), altHexEscape}}
		if b < 0x80 {
			alts = append(alts, alt{`\u00` + hex2(b), altUnicode},
				alt{"&#x" + hex2(b) + ";", altHTMLHex}, alt{"&#" + strconv.Itoa(int(b)) + ";", altHTMLDec})
			if b < 100 {
				alts = append(alts, alt{"&#0" + strconv.Itoa(int(b)) + ";", altHTMLDec})
			}
		}
		if b == '/' {
			alts = append(alts, alt{`\/`, altSlash})
		}
		p.units = append(p.units, dedupe(alts))
	}
	return p
}

// hexPattern is v in hex.
func hexPattern(v string) *pattern {
	p := &pattern{}
	for i := 0; i < len(v); i++ {
		p.units = append(p.units, []alt{{hex2(v[i]), altHex}})
	}
	return p
}

// base64Pattern is v base64-encoded after a bytes of something else: the
// characters whose bits include the value's, each given as every character
// (of both alphabets) with the value's bits at those places.
func base64Pattern(v string, a int) *pattern {
	bits := make([]bool, 8*(a+len(v))+6)
	for i := 0; i < len(v); i++ {
		for j := range 8 {
			bits[8*(a+i)+j] = v[i]&(0x80>>j) != 0
		}
	}
	first, last := 8*a/6, (8*(a+len(v))-1)/6 // characters holding value bits
	p := &pattern{b64: true, bit: 8*a - 6*first, bits: 8 * len(v)}
	for c := first; c <= last; c++ {
		var alts []alt
		for x := range 64 {
			ok := true
			for j := range 6 {
				bit := 6*c + j
				if bit >= 8*a && bit < 8*(a+len(v)) && bits[bit] != (x&(0x20>>j) != 0) {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			alts = append(alts, alt{string(lower(stdB64[x])), altBase64}, alt{string(lower(urlB64[x])), altBase64})
		}
		p.units = append(p.units, dedupe(alts))
	}
	return p
}

const (
	stdB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	urlB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
)

// b64Value decodes one base64 character of either alphabet (-1: none).
func b64Value(c byte) int {
	switch {
	case 'A' <= c && c <= 'Z':
		return int(c - 'A')
	case 'a' <= c && c <= 'z':
		return int(c-'a') + 26
	case '0' <= c && c <= '9':
		return int(c-'0') + 52
	case c == '+' || c == '-':
		return 62
	case c == '/' || c == '_':
		return 63
	}
	return -1
}

func dedupe(alts []alt) []alt {
	out := alts[:0:0]
	seen := map[string]bool{}
	for _, a := range alts {
		if !seen[a.text] {
			seen[a.text] = true
			out = append(out, a)
		}
	}
	return out
}

// matchState is the outcome of matching a pattern at a position.
type matchState uint8

const (
	noMatch matchState = iota
	partialMatch
	fullMatch
)

// matcher is the scratch state of one match.
type matcher struct {
	data   []byte
	final  bool
	choice []uint8 // the alternative taken per unit
	// failed holds unit*(len(data)+1)+pos known not to match, recorded
	// only below a unit where two alternatives matched (where a match
	// could be tried again by another path): without it a value rich in
	// '%', '&' and '\\' could make matching exponential.
	failed   map[int]bool
	branched int
}

// try matches p's units from unit u at pos.
func (m *matcher) try(p *pattern, pos, u int) (int, matchState) {
	if u == len(p.units) {
		return pos, fullMatch
	}
	rest := m.data[pos:]
	if len(rest) == 0 {
		if m.final {
			return 0, noMatch
		}
		return 0, partialMatch
	}
	if !p.first[u].has(rest[0]) {
		return 0, noMatch
	}
	key := u*(len(m.data)+1) + pos
	if m.failed[key] {
		return 0, noMatch
	}
	partial, tried := false, 0
	for i, a := range p.units[u] {
		if len(rest) < len(a.text) {
			if !m.final && equalFold(rest, a.text[:len(rest)]) {
				partial = true
			}
			continue
		}
		if !equalFold(rest[:len(a.text)], a.text) {
			continue
		}
		if tried++; tried == 2 {
			m.branched++
		}
		m.choice[u] = uint8(i)
		end, st := m.try(p, pos+len(a.text), u+1)
		if st == fullMatch {
			if tried >= 2 {
				m.branched--
			}
			return end, fullMatch
		}
		partial = partial || st == partialMatch
	}
	if tried >= 2 {
		m.branched--
	}
	if partial {
		return 0, partialMatch
	}
	if m.branched > 0 {
		if m.failed == nil {
			m.failed = map[int]bool{}
		}
		m.failed[key] = true
	}
	return 0, noMatch
}

// equalFold compares b with the lower-case s, ignoring ASCII case.
func equalFold(b []byte, s string) bool {
	for i := range b {
		if lower(b[i]) != s[i] {
			return false
		}
	}
	return true
}

// Scan overwrites every value found in data. With final false, data may
// continue: the bytes from the returned offset on could begin a value and
// are left for a later Scan with more bytes after them; before it, data
// is done. With final true the whole of data is done.
func (s *Scrubber) Scan(data []byte, final bool) int {
	if s.Empty() {
		return len(data)
	}
	m := &matcher{data: data, final: final}
	pairs := s.pairs
	for i := 0; i < len(data); {
		// The hot loop: most positions are ruled out by their two bytes.
		for i+1 < len(data) {
			p := int(data[i])<<8 | int(data[i+1])
			if pairs[p>>6]&(1<<(p&63)) != 0 {
				break
			}
			i++
		}
		if i+1 == len(data) && !s.start.has(data[i]) {
			break
		}
		held := false
		end := 0
		var hit *pattern
		for _, p := range s.pats {
			if !p.first[0].has(data[i]) {
				continue
			}
			if cap(m.choice) < len(p.units) {
				m.choice = make([]uint8, len(p.units))
			}
			m.choice = m.choice[:len(p.units)]
			clear(m.failed)
			e, st := m.try(p, i, 0)
			if st == fullMatch {
				hit, end = p, e
				p.replace(data[i:e], m.choice)
				break
			}
			held = held || st == partialMatch
		}
		switch {
		case hit != nil:
			i = end
		case held:
			return i
		default:
			i++
		}
	}
	return len(data)
}

// replace overwrites a match of p (seg, with the alternatives taken) with
// the fill in the same encoding and length.
func (p *pattern) replace(seg []byte, choice []uint8) {
	if p.b64 {
		p.replaceBase64(seg)
		return
	}
	const fillHex = "2a" // hex2(scrubFill)
	pos := 0
	for u, c := range choice {
		a := p.units[u][c]
		w := seg[pos : pos+len(a.text)]
		pos += len(a.text)
		switch a.kind {
		case altLiteral:
			w[0] = scrubFill
		case altPercent, altHexEscape:
			copy(w[len(w)-2:], "2A")
		case altUnicode:
			copy(w[len(w)-2:], fillHex)
		case altHex:
			copy(w, fillHex)
		case altHTMLHex:
			copy(w[len(w)-3:], fillHex+";")
		case altHTMLDec:
			d := strconv.Itoa(scrubFill) + ";"
			for len(d) < len(w)-2 {
				d = "0" + d
			}
			copy(w[2:], d)
		case altSlash:
			w[0], w[1] = scrubFill, scrubFill
		}
	}
}

// replaceBase64 re-encodes the characters of seg with the value's bits
// set to the fill's and the neighbours' bits kept, in seg's alphabet.
func (p *pattern) replaceBase64(seg []byte) {
	alphabet := stdB64
	for _, c := range seg {
		if c == '-' || c == '_' {
			alphabet = urlB64
		}
	}
	for k, c := range seg {
		v := b64Value(c)
		for j := range 6 {
			bit := 6*k + j - p.bit // within the value
			if bit < 0 || bit >= p.bits {
				continue
			}
			v &^= 0x20 >> j
			if scrubFill&(0x80>>(bit%8)) != 0 {
				v |= 0x20 >> j
			}
		}
		seg[k] = alphabet[v]
	}
}

// String returns s with every value found overwritten.
func (s *Scrubber) String(str string) string {
	if s.Empty() {
		return str
	}
	b := []byte(str)
	s.Scan(b, true)
	if string(b) == str {
		return str
	}
	return string(b)
}

// Header scrubs h in place: names and values.
func (s *Scrubber) Header(h http.Header) {
	if s.Empty() {
		return
	}
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = s.String(v)
		}
		if nk := s.String(k); nk != k {
			delete(h, k)
			h[nk] = append(h[nk], vs...)
		}
	}
}

// Reader returns r scrubbed as it is read: bytes that could begin a value
// are held back until the bytes after them show whether they do (or r
// ends). atEOF, when set, runs once when r is done, before Read returns
// io.EOF (to scrub a response's trailers, which are known only then).
func (s *Scrubber) Reader(r io.ReadCloser, atEOF func()) io.ReadCloser {
	return &scrubReader{s: s, r: r, atEOF: atEOF}
}

type scrubReader struct {
	s     *Scrubber
	r     io.ReadCloser
	atEOF func()

	buf        []byte // buf[off:ready] scrubbed, buf[ready:] held
	off, ready int
	err        error
}

// scrubChunk is how much is read from the source at once.
const scrubChunk = 32 << 10

func (sr *scrubReader) Read(p []byte) (int, error) {
	for sr.off == sr.ready {
		if sr.err != nil {
			if sr.ready < len(sr.buf) {
				sr.ready += sr.s.Scan(sr.buf[sr.ready:], true)
				continue
			}
			if sr.atEOF != nil && sr.err == io.EOF {
				sr.atEOF()
				sr.atEOF = nil
			}
			return 0, sr.err
		}
		// Keep the held bytes, make room after them, read.
		n := copy(sr.buf, sr.buf[sr.off:])
		sr.buf, sr.off, sr.ready = sr.buf[:n], 0, 0
		if cap(sr.buf)-n < scrubChunk {
			sr.buf = append(make([]byte, 0, n+scrubChunk), sr.buf...)
		}
		m, err := sr.r.Read(sr.buf[n : n+scrubChunk])
		sr.buf = sr.buf[:n+m]
		sr.err = err
		if m > 0 {
			sr.ready = sr.s.Scan(sr.buf, false)
		}
	}
	n := copy(p, sr.buf[sr.off:sr.ready])
	sr.off += n
	return n, nil
}

func (sr *scrubReader) Close() error { return sr.r.Close() }
