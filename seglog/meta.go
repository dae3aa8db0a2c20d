package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

const metaMagic = "SLMT"

// ErrMetaCorrupt is returned by ReadMeta for a metadata file that fails its
// checksum; WriteMeta never leaves one behind, so it means outside damage.
var ErrMetaCorrupt = errors.New("seglog: corrupt metadata file")

// WriteMeta atomically replaces the small metadata file dir/name with data:
// it writes a temporary file, fsyncs it, renames it over the old one and
// fsyncs the directory, so after a crash the file holds either the old or
// the new contents, never a mix.
func WriteMeta(dir, name string, data []byte) error {
	return writeMeta(osFS{}, dir, name, data)
}

func writeMeta(fs FS, dir, name string, data []byte) error {
	buf := make([]byte, 0, 12+len(data))
	buf = append(buf, metaMagic...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(data)))
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(data, castagnoli))
	buf = append(buf, data...)
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("seglog: write meta %s: %w", path, err)
	}
	_, err = f.WriteAt(buf, 0)
	if err == nil {
		err = f.Datasync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil {
		err = fs.SyncDir(dir)
	}
	if err != nil {
		_ = fs.Remove(tmp)
		return fmt.Errorf("seglog: write meta %s: %w", path, err)
	}
	return nil
}

// ReadMeta returns the contents of dir/name written by WriteMeta. A missing
// file gives an error matching os.ErrNotExist.
func ReadMeta(dir, name string) ([]byte, error) {
	return readMeta(osFS{}, dir, name)
}

func readMeta(fs FS, dir, name string) ([]byte, error) {
	path := filepath.Join(dir, name)
	buf, err := readWhole(fs, path)
	if err != nil {
		return nil, err
	}
	if len(buf) < 12 || string(buf[:4]) != metaMagic {
		return nil, fmt.Errorf("%w: %s: bad header", ErrMetaCorrupt, path)
	}
	n := binary.LittleEndian.Uint32(buf[4:8])
	if uint64(n) != uint64(len(buf)-12) {
		return nil, fmt.Errorf("%w: %s: length %d, file holds %d", ErrMetaCorrupt, path, n, len(buf)-12)
	}
	data := buf[12:]
	if crc32.Checksum(data, castagnoli) != binary.LittleEndian.Uint32(buf[8:12]) {
		return nil, fmt.Errorf("%w: %s: checksum mismatch", ErrMetaCorrupt, path)
	}
	return data, nil
}

// readWhole reads the small file path through fs.
func readWhole(fs FS, path string) ([]byte, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	if n > 1<<20 {
		return nil, fmt.Errorf("%w: %s: %d bytes", ErrMetaCorrupt, path, n)
	}
	buf := make([]byte, n)
	if got, err := f.ReadAt(buf, 0); err != nil && !(errors.Is(err, io.EOF) && int64(got) == n) {
		return nil, err
	}
	return buf, nil
}
