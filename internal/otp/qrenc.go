package otp

import (
	"errors"
	"sync"

	"github.com/makiuchi-d/gozxing/qrcode/decoder"
)

// A QR code encoder (ISO/IEC 18004) for level M, with one segment in the
// smallest of the numeric, alphanumeric or byte modes that holds all of
// the content. The version tables (block structure, alignment pattern
// centres) come from gozxing's decoder. The mask is chosen by the
// standard's four penalty rules, computed on one byte per module with
// tight loops: the general encoders spend most of an image there. The
// code is, module for module, the one ZXing's encoder (gozxing) makes
// for the same content (TestQREncodeMatchesZXing), about ten times
// faster.

// errQRTooLong refuses content beyond version 40 at level M.
var errQRTooLong = errors.New("content too long for a QR code at error correction level M")

const qrAlnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:"

// qrAlnumIndex maps a byte to its alphanumeric value, -1 if it has none.
var qrAlnumIndex = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := range len(qrAlnum) {
		t[qrAlnum[i]] = int8(i)
	}
	return t
}()

type qrMode int

const (
	qrNumeric qrMode = iota
	qrAlphanumeric
	qrByte
)

func qrChooseMode(s string) qrMode {
	if s == "" {
		return qrByte
	}
	mode := qrNumeric
	for i := range len(s) {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
		case qrAlnumIndex[c] >= 0:
			mode = qrAlphanumeric
		default:
			return qrByte
		}
	}
	return mode
}

// countBits is the length of the character count indicator.
func (m qrMode) countBits(version int) int {
	i := 0
	switch {
	case version >= 27:
		i = 2
	case version >= 10:
		i = 1
	}
	return [3][3]int{{10, 12, 14}, {9, 11, 13}, {8, 16, 16}}[m][i]
}

// dataBits is the length of the encoded content.
func (m qrMode) dataBits(n int) int {
	switch m {
	case qrNumeric:
		return n/3*10 + [3]int{0, 4, 7}[n%3]
	case qrAlphanumeric:
		return n/2*11 + n%2*6
	}
	return 8 * n
}

// bitWriter appends bits MSB first.
type bitWriter struct {
	b []byte
	n int // bits written
}

func (w *bitWriter) put(v uint32, bits int) {
	for i := bits - 1; i >= 0; i-- {
		if w.n%8 == 0 {
			w.b = append(w.b, 0)
		}
		if v>>i&1 == 1 {
			w.b[w.n/8] |= 0x80 >> (w.n % 8)
		}
		w.n++
	}
}

// qrEncode returns the size and the modules (row-major, 1 dark) of the
// QR code of content at level M.
func qrEncode(content string) (int, []byte, error) {
	m, n, err := qrLayout(content)
	if err != nil {
		return 0, nil, err
	}
	best, bestPenalty := -1, 0
	out := make([]byte, n*n)
	try := make([]byte, n*n)
	scratch := make([]byte, n*n)
	for mask := range 8 {
		m.masked(try, mask)
		if p := qrPenalty(try, scratch, n); best < 0 || p < bestPenalty {
			best, bestPenalty = mask, p
			out, try = try, out
		}
	}
	return n, out, nil
}

// qrLayout lays out the code of content before masking.
func qrLayout(content string) (*qrMatrix, int, error) {
	mode := qrChooseMode(content)
	var ver *decoder.Version
	var ecb *decoder.ECBlocks
	dataCap := 0
	for v := 1; v <= 40; v++ {
		vv, err := decoder.Version_GetVersionForNumber(v)
		if err != nil {
			return nil, 0, err
		}
		eb := vv.GetECBlocksForLevel(decoder.ErrorCorrectionLevel_M)
		c := vv.GetTotalCodewords() - eb.GetTotalECCodewords()
		if 4+mode.countBits(v)+mode.dataBits(len(content)) <= 8*c {
			ver, ecb, dataCap = vv, eb, c
			break
		}
	}
	if ver == nil {
		return nil, 0, errQRTooLong
	}
	version := ver.GetVersionNumber()

	// The data codewords.
	w := bitWriter{b: make([]byte, 0, dataCap)}
	w.put([3]uint32{1, 2, 4}[mode], 4)
	w.put(uint32(len(content)), mode.countBits(version))
	switch mode {
	case qrNumeric:
		for i := 0; i < len(content); i += 3 {
			j := min(i+3, len(content))
			v := uint32(0)
			for _, c := range []byte(content[i:j]) {
				v = v*10 + uint32(c-'0')
			}
			w.put(v, [4]int{0, 4, 7, 10}[j-i])
		}
	case qrAlphanumeric:
		for i := 0; i+1 < len(content); i += 2 {
			w.put(uint32(qrAlnumIndex[content[i]])*45+uint32(qrAlnumIndex[content[i+1]]), 11)
		}
		if len(content)%2 == 1 {
			w.put(uint32(qrAlnumIndex[content[len(content)-1]]), 6)
		}
	default:
		for i := range len(content) {
			w.put(uint32(content[i]), 8)
		}
	}
	w.put(0, min(4, 8*dataCap-w.n)) // terminator
	if w.n%8 != 0 {
		w.put(0, 8-w.n%8)
	}
	for i := 0; len(w.b) < dataCap; i++ {
		w.b = append(w.b, [2]byte{0xec, 0x11}[i%2])
	}

	// Blocks, their error correction, interleaved.
	ecLen := ecb.GetECCodewordsPerBlock()
	gen := rsGenerator(ecLen)
	var data, ecc [][]byte
	off := 0
	for _, g := range ecb.GetECBlocks() {
		for range g.GetCount() {
			d := w.b[off : off+g.GetDataCodewords()]
			off += len(d)
			data = append(data, d)
			ecc = append(ecc, rsRemainder(d, gen))
		}
	}
	stream := make([]byte, 0, ver.GetTotalCodewords())
	for i := 0; len(stream) < dataCap; i++ {
		for _, d := range data {
			if i < len(d) {
				stream = append(stream, d[i])
			}
		}
	}
	for i := range ecLen {
		for _, e := range ecc {
			stream = append(stream, e[i])
		}
	}

	n := ver.GetDimensionForVersion()
	m := newQRMatrix(n, ver)
	m.placeData(stream)
	return m, n, nil
}

// qrMatrix is a code before masking: its version's template and the
// data.
type qrMatrix struct {
	*qrTemplate
	mods []byte
}

// qrTemplate is what codes of one version share: the function patterns
// and version information (base), which modules they take (fn), the
// data modules in placement order, and each mask's dark data modules.
type qrTemplate struct {
	n     int
	base  []byte
	fn    []bool
	order []int
	masks [8][]byte
}

// qrTemplates are built once per version.
var qrTemplates [41]struct {
	once sync.Once
	t    *qrTemplate
}

func newQRMatrix(n int, ver *decoder.Version) *qrMatrix {
	c := &qrTemplates[ver.GetVersionNumber()]
	c.once.Do(func() { c.t = buildQRTemplate(n, ver) })
	return &qrMatrix{qrTemplate: c.t, mods: make([]byte, n*n)}
}

func buildQRTemplate(n int, ver *decoder.Version) *qrTemplate {
	m := &qrTemplate{n: n, base: make([]byte, n*n), fn: make([]bool, n*n)}
	set := func(x, y int, dark bool) {
		i := y*n + x
		m.fn[i] = true
		m.base[i] = 0
		if dark {
			m.base[i] = 1
		}
	}
	// Finder patterns with their separators.
	for _, c := range [][2]int{{0, 0}, {n - 7, 0}, {0, n - 7}} {
		for dy := -1; dy <= 7; dy++ {
			for dx := -1; dx <= 7; dx++ {
				x, y := c[0]+dx, c[1]+dy
				if x < 0 || y < 0 || x >= n || y >= n {
					continue
				}
				ring := max(abs(dx-3), abs(dy-3))
				set(x, y, ring != 2 && ring != 4)
			}
		}
	}
	// Alignment patterns.
	centers := ver.GetAlignmentPatternCenters()
	for _, cy := range centers {
		for _, cx := range centers {
			if m.fn[cy*n+cx] {
				continue // on a finder pattern
			}
			for dy := -2; dy <= 2; dy++ {
				for dx := -2; dx <= 2; dx++ {
					set(cx+dx, cy+dy, max(abs(dx), abs(dy)) != 1)
				}
			}
		}
	}
	// Timing patterns.
	for i := 8; i < n-8; i++ {
		if !m.fn[6*n+i] {
			set(i, 6, i%2 == 0)
		}
		if !m.fn[i*n+6] {
			set(6, i, i%2 == 0)
		}
	}
	// Dark module, format information (written per mask).
	set(8, n-8, true)
	for _, p := range qrFormatPositions(n) {
		set(p[0], p[1], false)
		set(p[2], p[3], false)
	}
	// Version information.
	if v := ver.GetVersionNumber(); v >= 7 {
		bits := uint32(v)<<12 | bch(uint32(v), 0x1f25, 13)
		k := 0
		for i := range 6 {
			for j := range 3 {
				dark := bits>>k&1 == 1
				k++
				set(i, n-11+j, dark)
				set(n-11+j, i, dark)
			}
		}
	}
	m.placeOrder()
	for mask := range 8 {
		t := make([]byte, n*n)
		for _, i := range m.order {
			x, y := i%n, i/n
			var flip bool
			switch mask {
			case 0:
				flip = (x+y)%2 == 0
			case 1:
				flip = y%2 == 0
			case 2:
				flip = x%3 == 0
			case 3:
				flip = (x+y)%3 == 0
			case 4:
				flip = (y/2+x/3)%2 == 0
			case 5:
				flip = x*y%2+x*y%3 == 0
			case 6:
				flip = (x*y%2+x*y%3)%2 == 0
			default:
				flip = (x*y%3+(x+y)%2)%2 == 0
			}
			if flip {
				t[i] = 1
			}
		}
		m.masks[mask] = t
	}
	return m
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// bch is the remainder of v·x^(deg-1) divided by poly (of degree deg-1).
func bch(v, poly uint32, deg int) uint32 {
	v <<= deg - 1
	for i := 31; i >= deg-1; i-- {
		if v>>i&1 == 1 {
			v ^= poly << (i - (deg - 1))
		}
	}
	return v
}

// qrFormatPositions are the two places of each bit of the format
// information, least significant first: x1, y1, x2, y2.
func qrFormatPositions(n int) [15][4]int {
	var p [15][4]int
	first := [15][2]int{{8, 0}, {8, 1}, {8, 2}, {8, 3}, {8, 4}, {8, 5}, {8, 7}, {8, 8}, {7, 8}, {5, 8}, {4, 8}, {3, 8}, {2, 8}, {1, 8}, {0, 8}}
	for i := range 15 {
		p[i][0], p[i][1] = first[i][0], first[i][1]
		if i < 8 {
			p[i][2], p[i][3] = n-1-i, 8
		} else {
			p[i][2], p[i][3] = 8, n-7+(i-8)
		}
	}
	return p
}

// placeOrder lists the data modules in the standard zigzag, two
// columns at a time from the bottom right.
func (m *qrTemplate) placeOrder() {
	n := m.n
	up := true
	for x := n - 1; x > 0; x -= 2 {
		if x == 6 {
			x--
		}
		for k := range n {
			y := k
			if up {
				y = n - 1 - k
			}
			for _, xx := range [2]int{x, x - 1} {
				if i := y*n + xx; !m.fn[i] {
					m.order = append(m.order, i)
				}
			}
		}
		up = !up
	}
}

// placeData writes the codewords into the data modules; remainder bits
// are light.
func (m *qrMatrix) placeData(stream []byte) {
	copy(m.mods, m.base)
	for k, i := range m.order[:min(len(m.order), 8*len(stream))] {
		m.mods[i] = stream[k/8] >> (7 - k%8) & 1
	}
}

// masked writes the code with mask into dst, format information
// included.
func (m *qrMatrix) masked(dst []byte, mask int) {
	n := m.n
	t := m.masks[mask][:len(dst)]
	src := m.mods[:len(dst)]
	for i := range dst {
		dst[i] = src[i] ^ t[i]
	}
	// Level M is 00, then the mask; BCH(15,5), XORed with 0x5412.
	info := uint32(mask)
	bits := (info<<10 | bch(info, 0x537, 11)) ^ 0x5412
	for k, p := range qrFormatPositions(n) {
		b := byte(bits >> k & 1)
		dst[p[1]*n+p[0]] = b
		dst[p[3]*n+p[2]] = b
	}
}

// qrPenalty is the sum of the standard's four penalty rules; t is
// scratch space of n·n bytes.
func qrPenalty(a, t []byte, n int) int {
	// The columns are the rows of the transposed code.
	for y := range n {
		for x := range n {
			t[x*n+y] = a[y*n+x]
		}
	}
	p, dark := 0, 0
	for k := range n {
		row := a[k*n : (k+1)*n]
		p += lineRules(row) + lineRules(t[k*n:(k+1)*n])
		for _, c := range row {
			dark += int(c)
		}
	}
	// Rule 2: each 2×2 block of one colour, 3.
	for y := 0; y+1 < n; y++ {
		r0, r1 := a[y*n:(y+1)*n], a[(y+1)*n:(y+2)*n]
		r1 = r1[:len(r0)]
		for x := 0; x+1 < len(r0); x++ {
			c := r0[x]
			if (c^r0[x+1])|(c^r1[x])|(c^r1[x+1]) == 0 {
				p += 3
			}
		}
	}
	// Rule 4: 10 per 5 % the dark modules are away from half.
	total := n * n
	return p + abs(dark*2-total)*10/total*10
}

// lineRules are rule 1 (each run of five or more modules of one colour,
// 3 + 1 per module beyond five) and rule 3 (each 1:1:3:1:1 pattern with
// four light modules before or after it, outside the code counting as
// light, 40) for one row or column.
func lineRules(line []byte) int {
	p := 0
	run := 0
	var prev byte = 2
	// w holds the last 15 modules of the line with four light modules
	// on either side: four before, the pattern's seven, four after.
	var w uint32
	for _, c := range line {
		// Rule 1 counts 3 when a run reaches five, 1 for each module
		// beyond: a run's penalty without looking back at its end.
		if c == prev {
			run++
		} else {
			run = 1
		}
		prev = c
		if run >= 5 {
			p += 1 + 2*(5/run)
		}
		w = (w<<1 | uint32(c)) & 0x7fff
		if (w>>4)&0x7f == 0x5d && (w>>11 == 0 || w&0xf == 0) {
			p += 40
		}
	}
	for range 4 {
		w = (w << 1) & 0x7fff
		if (w>>4)&0x7f == 0x5d && (w>>11 == 0 || w&0xf == 0) {
			p += 40
		}
	}
	return p
}

// Reed-Solomon over GF(256) with the polynomial x⁸+x⁴+x³+x²+1.
var gfExp, gfLog = func() (exp [512]byte, log [256]byte) {
	x := 1
	for i := range 255 {
		exp[i] = byte(x)
		log[x] = byte(i)
		x <<= 1
		if x&0x100 != 0 {
			x ^= 0x11d
		}
	}
	for i := 255; i < 512; i++ {
		exp[i] = exp[i-255]
	}
	return exp, log
}()

func gfMul(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return gfExp[int(gfLog[a])+int(gfLog[b])]
}

// rsGenerator is ∏(x - αⁱ) for i < deg, highest coefficient first
// (which is 1 and left out).
func rsGenerator(deg int) []byte {
	g := []byte{1}
	for i := range deg {
		next := make([]byte, len(g)+1)
		for j, c := range g {
			next[j] ^= c
			next[j+1] ^= gfMul(c, gfExp[i])
		}
		g = next
	}
	return g[1:]
}

// rsRemainder is data·x^len(gen) modulo the generator: the error
// correction codewords.
func rsRemainder(data, gen []byte) []byte {
	r := make([]byte, len(gen))
	for _, d := range data {
		f := d ^ r[0]
		copy(r, r[1:])
		r[len(r)-1] = 0
		if f != 0 {
			for j, g := range gen {
				r[j] ^= gfMul(g, f)
			}
		}
	}
	return r
}
