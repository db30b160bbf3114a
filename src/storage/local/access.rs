//! Whose permissions a local store's reads are checked against ([`Identity`]).
//!
//! A daemon running as root (or any user more privileged than a dataset's owner) can read
//! files that owner cannot. A dataset names other objects by absolute location (reference
//! views), so without a check, whoever writes a dataset could have root serve them any file
//! root can read. A store confined to an identity therefore checks, on the descriptors its
//! walk opens, that the identity could have made the same walk: search permission on every
//! directory looked up in, read permission on the object. The check is on the very inodes
//! the walk opened, so nothing can be swapped between the check and the read.
//!
//! Permission is judged as the kernel judges it: by the inode's POSIX access ACL when it has
//! one (acl(5), "access check algorithm": owner entry, named-user entries under the mask, then
//! the owning-group and named-group entries under the mask, then others), else by mode bits
//! (the owner class when the identity owns the inode, else the group class when one of its
//! groups is the inode's group, else the other class). A malformed ACL refuses. ACLs are read
//! through `/proc/self/fd`; without `/proc`, mode bits alone decide.

use std::ffi::{CStr, CString};
use std::fs::Metadata;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::MetadataExt;

use nix::unistd::{getgrouplist, Gid, Uid, User};

/// Ceiling for the supplementary groups of one user (Linux's `NGROUPS_MAX`).
const MAX_GROUPS: usize = 65_536;

/// Permission bits of one class (`r-x` order).
const READ: u32 = 0o4;
const SEARCH: u32 = 0o1;

/// The tags of POSIX ACL entries (`linux/posix_acl.h`).
const ACL_USER_OBJ: u16 = 0x01;
const ACL_USER: u16 = 0x02;
const ACL_GROUP_OBJ: u16 = 0x04;
const ACL_GROUP: u16 = 0x08;
const ACL_MASK: u16 = 0x10;
const ACL_OTHER: u16 = 0x20;

/// The version of the `system.posix_acl_access` encoding (`linux/posix_acl_xattr.h`).
const ACL_XATTR_VERSION: u32 = 2;

/// One entry of a POSIX ACL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AclEntry {
    tag: u16,
    perm: u32,
    id: u32,
}

/// The permission-relevant facts of one inode.
#[derive(Debug, Clone)]
pub(crate) struct Access {
    pub(crate) mode: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// The inode's access ACL, when it has one.
    pub(crate) acl: Option<Vec<AclEntry>>,
}

impl From<&Metadata> for Access {
    fn from(meta: &Metadata) -> Access {
        Access {
            mode: meta.mode(),
            uid: meta.uid(),
            gid: meta.gid(),
            acl: None,
        }
    }
}

impl Access {
    /// These facts with the access ACL of the inode `fd` refers to (the same inode).
    pub(crate) fn with_acl_of(mut self, fd: BorrowedFd<'_>) -> io::Result<Access> {
        if let Some(raw) = super::sys::access_acl(fd)? {
            self.acl = Some(parse_acl(&raw).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "malformed POSIX access ACL")
            })?);
        }
        Ok(self)
    }
}

/// Decodes `system.posix_acl_access`: a little-endian version word, then 8-byte entries
/// (tag u16, perm u16, id u32).
fn parse_acl(raw: &[u8]) -> Option<Vec<AclEntry>> {
    let (version, entries) = raw.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*version) != ACL_XATTR_VERSION || entries.len() % 8 != 0 {
        return None;
    }
    let entries = entries.chunks_exact(8).map(|e| AclEntry {
        tag: u16::from_le_bytes([e[0], e[1]]),
        perm: u32::from(u16::from_le_bytes([e[2], e[3]])),
        id: u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
    });
    Some(entries.collect())
}

/// A user, with the groups the kernel would give their processes, whose permissions confine
/// a store's reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    uid: u32,
    groups: Vec<u32>,
    /// `name (uid N)`, or `uid N` without a passwd entry: for messages.
    shown: String,
}

impl Identity {
    /// The user `uid` as the system knows them: their passwd entry's primary group and their
    /// supplementary groups (`getgrouplist`); only `gid` when there is no passwd entry.
    pub fn of_user(uid: u32, gid: u32) -> Identity {
        match passwd_entry(uid) {
            Some((name, primary)) => Identity {
                uid,
                groups: group_list(&name, primary),
                shown: format!("{} (uid {uid})", name.to_string_lossy()),
            },
            None => Identity {
                uid,
                groups: vec![gid],
                shown: format!("uid {uid}"),
            },
        }
    }

    /// Who this is, for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The user id.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// Whether this identity may search (walk through) the directory `access` describes.
    pub(crate) fn may_search(&self, access: &Access) -> bool {
        self.permits(access, SEARCH)
    }

    /// Whether this identity may read the object `access` describes.
    pub(crate) fn may_read(&self, access: &Access) -> bool {
        self.permits(access, READ)
    }

    /// The class (or ACL entry) the kernel picks decides alone (an owner denied what others
    /// may do is denied). Root may do anything.
    fn permits(&self, access: &Access, wanted: u32) -> bool {
        if self.uid == 0 {
            return true;
        }
        if let Some(acl) = &access.acl {
            return self.acl_permits(acl, access, wanted);
        }
        let class = if access.uid == self.uid {
            access.mode >> 6
        } else if self.groups.contains(&access.gid) {
            access.mode >> 3
        } else {
            access.mode
        };
        class & wanted == wanted
    }
}

impl Identity {
    /// acl(5)'s access check: the first class of entry that matches decides.
    fn acl_permits(&self, acl: &[AclEntry], access: &Access, wanted: u32) -> bool {
        let perm_of = |tag: u16| acl.iter().find(|e| e.tag == tag).map_or(0, |e| e.perm);
        let grants = |perm: u32| perm & wanted == wanted;
        let mask = acl
            .iter()
            .find(|e| e.tag == ACL_MASK)
            .map_or(0o7, |e| e.perm);
        if access.uid == self.uid {
            return grants(perm_of(ACL_USER_OBJ));
        }
        if let Some(named) = acl.iter().find(|e| e.tag == ACL_USER && e.id == self.uid) {
            return grants(named.perm & mask);
        }
        let mut member = false;
        for entry in acl {
            let matches = match entry.tag {
                ACL_GROUP_OBJ => self.groups.contains(&access.gid),
                ACL_GROUP => self.groups.contains(&entry.id),
                _ => false,
            };
            if matches && grants(entry.perm & mask) {
                return true;
            }
            member |= matches;
        }
        !member && grants(perm_of(ACL_OTHER))
    }
}

/// The login name and primary group of `uid`, `None` when it has no passwd entry.
fn passwd_entry(uid: u32) -> Option<(CString, u32)> {
    let user = User::from_uid(Uid::from_raw(uid)).ok().flatten()?;
    Some((CString::new(user.name).ok()?, user.gid.as_raw()))
}

/// `primary` and the supplementary groups of user `name`; `primary` alone if the list cannot
/// be had.
fn group_list(name: &CStr, primary: u32) -> Vec<u32> {
    match getgrouplist(name, Gid::from_raw(primary)) {
        Ok(groups) if groups.len() <= MAX_GROUPS => groups.into_iter().map(Gid::as_raw).collect(),
        _ => vec![primary],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(uid: u32, groups: &[u32]) -> Identity {
        Identity {
            uid,
            groups: groups.to_vec(),
            shown: format!("uid {uid}"),
        }
    }

    fn inode(mode: u32, uid: u32, gid: u32) -> Access {
        Access {
            mode,
            uid,
            gid,
            acl: None,
        }
    }

    fn entry(tag: u16, perm: u32, id: u32) -> AclEntry {
        AclEntry { tag, perm, id }
    }

    #[test]
    fn an_acl_decides_by_the_first_matching_class_under_the_mask() {
        let alice = user(1000, &[1000, 50]);
        let with = |entries: Vec<AclEntry>| Access {
            acl: Some(entries),
            ..inode(0o640, 0, 42)
        };
        let base = |extra: &[AclEntry]| {
            let mut acl = vec![entry(ACL_USER_OBJ, 6, u32::MAX)];
            acl.extend_from_slice(extra);
            acl.push(entry(ACL_GROUP_OBJ, 4, u32::MAX));
            acl.push(entry(ACL_OTHER, 4, u32::MAX));
            acl
        };
        // A named entry denies what "other" grants.
        assert!(!alice.may_read(&with(base(&[entry(ACL_USER, 0, 1000)]))));
        // A named entry grants, under a mask that allows it.
        let mut granted = base(&[entry(ACL_USER, 4, 1000), entry(ACL_MASK, 4, u32::MAX)]);
        granted.retain(|e| e.tag != ACL_OTHER);
        assert!(alice.may_read(&with(granted.clone())));
        // The mask takes it back.
        for e in granted.iter_mut().filter(|e| e.tag == ACL_MASK) {
            e.perm = 0;
        }
        assert!(!alice.may_read(&with(granted)));
        // A matching group that does not grant denies, even though "other" would.
        let groups = base(&[entry(ACL_GROUP, 0, 50)]);
        assert!(!alice.may_read(&with(groups)));
        assert_eq!(
            parse_acl(&[2, 0, 0, 0, 2, 0, 4, 0, 0xe8, 3, 0, 0]),
            Some(vec![entry(ACL_USER, 4, 1000)])
        );
        assert_eq!(parse_acl(&[1, 0, 0, 0]), None);
        assert_eq!(parse_acl(&[2, 0, 0, 0, 1]), None);
    }

    #[test]
    fn the_class_the_kernel_picks_decides() {
        let alice = user(1000, &[1000, 50]);
        assert!(alice.may_read(&inode(0o400, 1000, 0)));
        // Owner class alone: group and other bits do not help the owner.
        assert!(!alice.may_read(&inode(0o044, 1000, 1000)));
        assert!(alice.may_read(&inode(0o040, 0, 50)));
        assert!(!alice.may_read(&inode(0o004, 0, 50)));
        assert!(alice.may_read(&inode(0o004, 0, 0)));
        assert!(!alice.may_read(&inode(0o640, 0, 42)));
        assert!(alice.may_search(&inode(0o711, 0, 0)));
        assert!(!alice.may_search(&inode(0o700, 0, 0)));
        assert!(!alice.may_search(&inode(0o766, 0, 0)));
        assert!(user(0, &[0]).may_read(&inode(0o000, 5, 5)));
    }

    #[test]
    fn users_without_an_entry_have_the_group_given() {
        // uid 4,000,000,000 has no passwd entry on any sane system.
        let ghost = Identity::of_user(4_000_000_000, 77);
        assert_eq!(ghost.groups, vec![77]);
        assert_eq!(ghost.shown(), "uid 4000000000");
        let root = Identity::of_user(0, 0);
        assert_eq!(root.shown(), "root (uid 0)");
        assert!(root.groups.contains(&0));
    }
}
