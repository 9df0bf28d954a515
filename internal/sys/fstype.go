package sys

// FSType returns the name of the file system type holding path, from
// statfs(2)'s f_type magic number ("ext2/ext3/ext4", "xfs", "btrfs",
// "tmpfs", ...), or "unknown (0x...)" for a magic number it does not know.
// On platforms without statfs it returns an error.
func FSType(path string) (string, error) {
	return fsType(path)
}
