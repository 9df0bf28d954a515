//go:build linux

package sys

import (
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// fsName names the statfs(2) f_type values of common file systems.
// ext2, ext3 and ext4 share one magic number.
func fsName(magic int64) (string, bool) {
	switch magic {
	case unix.EXT4_SUPER_MAGIC:
		return "ext2/ext3/ext4", true
	case unix.XFS_SUPER_MAGIC:
		return "xfs", true
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs", true
	case unix.TMPFS_MAGIC:
		return "tmpfs", true
	case unix.RAMFS_MAGIC:
		return "ramfs", true
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs", true
	case unix.NFS_SUPER_MAGIC:
		return "nfs", true
	case unix.F2FS_SUPER_MAGIC:
		return "f2fs", true
	case unix.FUSE_SUPER_MAGIC:
		return "fuse", true
	case unix.V9FS_MAGIC:
		return "9p", true
	case 0x2fc12fc1:
		return "zfs", true
	case 0xca451a4e:
		return "bcachefs", true
	}
	return "", false
}

func fsType(path string) (string, error) {
	var st unix.Statfs_t
	if err := retryEINTR(func() error { return unix.Statfs(path, &st) }); err != nil {
		return "", &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	if name, ok := fsName(int64(uint32(st.Type))); ok {
		return name, nil
	}
	return fmt.Sprintf("unknown (0x%x)", st.Type), nil
}
