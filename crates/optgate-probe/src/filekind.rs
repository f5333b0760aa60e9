//! What kind of file a mode says, in words, for errors that refuse what is not a regular
//! file: "a pipe", "a directory", …. One home for the experiment reader, the run
//! directory's reader and the trace reader.

/// The kind of file with mode `st_mode` (as `stat(2)` or `Metadata::mode` give it), in
/// words: "a regular file", "a directory", "a pipe", "a character device", "a block
/// device", "a socket", "a symbolic link", or "not a regular file".
pub fn file_kind(st_mode: u32) -> &'static str {
    match st_mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFIFO => "a pipe",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFLNK => "a symbolic link",
        _ => "not a regular file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn each_kind_of_file_in_words() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let fifo = dir.path().join("p");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let kind = |p: &std::path::Path| file_kind(std::fs::symlink_metadata(p).unwrap().mode());
        assert_eq!(kind(&file), "a regular file");
        assert_eq!(kind(dir.path()), "a directory");
        assert_eq!(kind(&fifo), "a pipe");
        assert_eq!(kind(&link), "a symbolic link");
        assert_eq!(kind("/dev/null".as_ref()), "a character device");
        assert_eq!(file_kind(0), "not a regular file");
    }
}
