//! The file tree of one record, built from its metadata row alone.
//!
//! Field names become paths (see [`crate::format::names`]); each field contributes one file per view.
//! Nodes are numbered in a fixed order (node 0 is `fields/`), which is what makes inode numbers
//! computable: `(ordinal, node index)`. Children are sorted by name so listings are stable and
//! lookups are binary searches. Every size is computed here, so `stat`, `ls -l` and `du` never
//! need the data shard.

use std::borrow::Cow;
use std::collections::HashMap;

use compact_str::CompactString;

use super::views::picture::{self, PanelKind};
use super::views::sigmf::{
    BoxTensors, FieldRef, FieldsOf, MetaLayout, MetaSource, NamesMemo, Provenance, RowFields,
};
use super::views::{self, View};
use crate::format::names::encode_field_path;
use crate::format::npy;
use crate::format::record::{FieldMeta, LazyRow, RecordMeta};

/// One field of the record, with the sizes of its views. Its model is the row's, parsed again
/// when asked ([`RecordTree::field_meta_at`]), and its small texts (`.json`, the `.npy`
/// header) are written again on each read: a record of thousands of fields would otherwise
/// keep them all, several times the size of its row.
#[derive(Debug)]
pub struct FieldEntry {
    pub name: String,
    /// The model of a field that is not the row's (a source record's field seen through an
    /// annotation set's labels); `None` for the row's own fields.
    held: Option<Box<FieldMeta>>,
    /// Length of the tensor's bytes.
    pub raw_len: u64,
    npy_header_len: u64,
    json_len: u64,
    pub sigmf_meta: Option<MetaLayout>,
    /// Shown only as a metadata-only `.sigmf-meta`: a source record's field seen through an
    /// annotation set's labels (its bytes are not the carrier's).
    pub meta_only: bool,
}

impl FieldEntry {
    /// Size of one view's file.
    pub fn view_len(&self, view: View) -> u64 {
        match view {
            View::Raw | View::SigmfData => self.raw_len,
            View::Npy => self.npy_header_len + self.raw_len,
            View::Json => self.json_len,
            View::SigmfMeta => self.sigmf_meta.as_ref().map_or(0, MetaLayout::len),
            View::Spectrogram => picture::spectrogram_len(),
        }
    }

    /// What the entry holds on the heap beside its slot.
    pub fn heap_bytes(&self) -> u64 {
        use crate::format::json::{text_heap_bytes, ALLOCATION};
        let boxed = |size: usize| size as u64 + ALLOCATION;
        let held = |f: &FieldMeta| boxed(std::mem::size_of::<FieldMeta>()) + f.heap_bytes();
        text_heap_bytes(self.name.capacity())
            + self.sigmf_meta.as_ref().map_or(0, MetaLayout::held_bytes)
            + self.held.as_deref().map_or(0, held)
    }
}

/// A node of a field tree: a record's (whose files are [`View`]s of its fields) or the one of
/// `columns/` (whose files are views of whole columns).
#[derive(Debug)]
pub enum Node<V = View> {
    Dir {
        name: CompactString,
        parent: u32,
        /// Child node indices, sorted by name.
        children: Vec<u32>,
    },
    File {
        name: CompactString,
        parent: u32,
        field: u32,
        view: V,
    },
}

/// A kind of file a field shows, named by its suffix.
pub trait FileView: Copy {
    fn suffix(self) -> &'static str;
}

impl FileView for View {
    fn suffix(self) -> &'static str {
        View::suffix(self)
    }
}

/// The child of directory node `dir` called `name` (children are sorted by name).
pub fn child_named<V>(nodes: &[Node<V>], dir: u32, name: &str) -> Option<u32> {
    let Some(Node::Dir { children, .. }) = nodes.get(dir as usize) else {
        return None;
    };
    let name_of = |c: u32| nodes.get(c as usize).map_or("", Node::name);
    children
        .binary_search_by(|&c| name_of(c).cmp(name))
        .ok()
        .and_then(|i| children.get(i).copied())
}

impl<V> Node<V> {
    pub fn name(&self) -> &str {
        match self {
            Node::Dir { name, .. } | Node::File { name, .. } => name,
        }
    }

    /// What the node holds on the heap: a directory's list of children, and its name unless
    /// it is kept inline (24 bytes or less, nearly every name).
    pub fn heap_bytes(&self) -> u64 {
        use crate::format::json::{text_heap_bytes, ALLOCATION};
        let (name, children) = match self {
            Node::Dir { name, children, .. } => (name, children.capacity()),
            Node::File { name, .. } => (name, 0),
        };
        let name = match name.is_heap_allocated() {
            true => text_heap_bytes(name.len()),
            false => 0,
        };
        let children = match children {
            0 => 0,
            slots => slots as u64 * 4 + ALLOCATION,
        };
        name + children
    }

    pub fn parent(&self) -> u32 {
        match self {
            Node::Dir { parent, .. } | Node::File { parent, .. } => *parent,
        }
    }
}

/// Everything the mount shows for one record, from its row. The row is kept as its text
/// ([`LazyRow`]): its fields' models are parsed when asked, their entries in
/// [`RecordTree::fields`] hold only names and sizes; `record.json` is written again when read.
#[derive(Debug)]
pub struct RecordTree {
    pub ordinal: u64,
    /// The dataset and snapshot the record belongs to (its SigMF documents name them).
    dataset_id: String,
    snapshot_id: String,
    /// The record's row: id, scene, metadata, and its fields as text.
    pub row: LazyRow,
    record_json_len: u64,
    /// The row's fields in name order, then (carriers) the source's labelled fields.
    pub fields: Vec<FieldEntry>,
    /// How many of `fields` are the row's own.
    own_fields: usize,
    pub nodes: Vec<Node>,
    /// Paths dropped because they clashed with an earlier one (logged by the caller).
    pub clashes: Vec<String>,
    /// The SigMF recordings shown: each `.sigmf-meta`'s path below `fields/` without its
    /// suffix, and its field, in path order.
    pub sigmf_streams: Vec<(CompactString, u32)>,
    /// What `preview.png` shows: its panels' fields and kinds.
    pub preview_panels: Vec<(String, PanelKind)>,
}

/// The dataset a tree's record belongs to.
#[derive(Debug, Clone, Copy)]
pub struct DatasetIds<'a> {
    pub dataset_id: &'a str,
    pub snapshot_id: &'a str,
}

/// Why a tree could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("field {name:?}: {detail}")]
    Field { name: String, detail: String },
    #[error("record has more than {0} files and directories")]
    TooManyNodes(u64),
    #[error(transparent)]
    Row(#[from] crate::format::record::RecordError),
}

impl RecordTree {
    /// The tree of a row already parsed whole (tests, and rows made here).
    pub fn build(ordinal: u64, meta: RecordMeta, ids: DatasetIds) -> Result<RecordTree, TreeError> {
        RecordTree::build_carrier(ordinal, LazyRow::of_meta(&meta)?, None, ids)
    }

    /// The tree of a row read from the dataset.
    pub fn build_from_row(
        ordinal: u64,
        row: LazyRow,
        ids: DatasetIds,
    ) -> Result<RecordTree, TreeError> {
        RecordTree::build_carrier(ordinal, row, None, ids)
    }

    /// The tree of an annotation set's carrier `row` for a record whose row is `source`:
    /// the carrier's fields, plus a metadata-only `.sigmf-meta` for each of the source's SigMF
    /// fields that the carrier's box labels annotate (`docs/MOUNT.md`, "Labels as SigMF
    /// annotations"), so a set's detections read like the record's own labels.
    pub fn build_carrier(
        ordinal: u64,
        row: LazyRow,
        source: Option<&RecordMeta>,
        ids: DatasetIds,
    ) -> Result<RecordTree, TreeError> {
        let at = Provenance {
            dataset_id: ids.dataset_id,
            snapshot_id: ids.snapshot_id,
            record_id: &row.id,
            ordinal,
        };
        let mut builder = Builder::default();
        let names = NamesMemo::default();
        let lookups = RowFields::new(&row);
        let mut fields = Vec::with_capacity(row.field_count());
        let mut preview_panels = Vec::new();
        for index in 0..row.field_count() {
            let name = row.field_name(index).unwrap_or_default();
            let field = row.field(index)?;
            fields.push(field_entry(name, &field, &lookups, &at, &names)?);
            builder.add_files(index as u32, name, views::views_of(&field))?;
            if preview_panels.len() < picture::MAX_PANELS {
                if let Some(kind) = picture::panel_kind(&field) {
                    preview_panels.push((name.to_string(), kind));
                }
            }
        }
        let own_fields = fields.len();
        let labelled = source
            .map(|s| labelled_source_fields(s, &lookups, &at, &names))
            .unwrap_or_default();
        for (index, entry) in labelled.into_iter().enumerate() {
            builder.add_files((own_fields + index) as u32, &entry.name, [View::SigmfMeta])?;
            fields.push(entry);
        }
        drop(lookups);
        let (nodes, clashes) = builder.finish();
        let record_json_len = record_json_of_row(&row, ordinal)?.len() as u64;
        let mut tree = RecordTree {
            ordinal,
            dataset_id: ids.dataset_id.to_string(),
            snapshot_id: ids.snapshot_id.to_string(),
            row,
            record_json_len,
            fields,
            own_fields,
            nodes,
            clashes,
            sigmf_streams: Vec::new(),
            preview_panels,
        };
        tree.sigmf_streams = tree.find_sigmf_streams();
        Ok(tree)
    }

    /// The record's id.
    pub fn id(&self) -> &str {
        &self.row.id
    }

    /// The row's own fields, in name order.
    pub fn own_fields(&self) -> &[FieldEntry] {
        &self.fields[..self.own_fields.min(self.fields.len())]
    }

    /// The model of field `index` of [`RecordTree::fields`]: a labelled source field's as
    /// held, the row's own parsed from the row (which was checked when the tree was built).
    pub fn field_meta_at(&self, index: usize) -> Option<Cow<'_, FieldMeta>> {
        let entry = self.fields.get(index)?;
        if let Some(held) = entry.held.as_deref() {
            return Some(Cow::Borrowed(held));
        }
        match self.row.field(index) {
            Ok(field) => Some(Cow::Owned(field)),
            Err(e) => {
                let ordinal = self.ordinal;
                tracing::warn!(ordinal, error = %e, "a field of a kept row no longer reads");
                None
            }
        }
    }

    /// The row's field called `name`.
    pub fn field_meta(&self, name: &str) -> Option<FieldMeta> {
        self.row.field(self.row.field_index(name)?).ok()
    }

    /// The `.json` view's text of field `index`.
    pub fn field_json(&self, index: usize) -> Option<Vec<u8>> {
        let entry = self.fields.get(index)?;
        Some(views::field_json(&entry.name, &*self.field_meta_at(index)?))
    }

    /// The `.npy` view's header of field `index`.
    pub fn npy_header(&self, index: usize) -> Option<Vec<u8>> {
        let field = self.field_meta_at(index)?;
        Some(npy::encode_header(field.dtype, &field.shape))
    }

    /// The row, put together again (a copy: for what needs it whole, which is rare).
    pub fn record_meta(&self) -> Result<RecordMeta, crate::format::record::RecordError> {
        self.row.to_meta()
    }

    /// The row's [`RecordMeta::fingerprint`].
    pub fn fingerprint(&self) -> Result<u64, crate::format::record::RecordError> {
        self.row.fingerprint()
    }

    /// Field `index`'s `.sigmf-meta`, with the boxes read from `tensors` (`None` when it has
    /// none): `None` when the field has no such file.
    pub fn render_sigmf_meta(
        &self,
        index: usize,
        tensors: Option<&BoxTensors>,
    ) -> Option<Result<Vec<u8>, crate::fs::error::FsError>> {
        let entry = self.fields.get(index)?;
        let layout = entry.sigmf_meta.as_ref()?;
        let field = self.field_meta_at(index)?;
        let at = Provenance {
            dataset_id: &self.dataset_id,
            snapshot_id: &self.snapshot_id,
            record_id: &self.row.id,
            ordinal: self.ordinal,
        };
        let source = MetaSource {
            name: &entry.name,
            field: &field,
            record: self,
            at: &at,
        };
        Some(layout.render(tensors, source))
    }

    /// Size of `record.json`.
    pub fn record_json_len(&self) -> u64 {
        self.record_json_len
    }

    /// `record.json`'s text.
    pub fn record_json(&self) -> Result<Vec<u8>, crate::format::record::RecordError> {
        record_json_of_row(&self.row, self.ordinal)
    }

    /// Every `.sigmf-meta` file node's path (below `fields/`, suffix removed) and field.
    fn find_sigmf_streams(&self) -> Vec<(CompactString, u32)> {
        let mut streams: Vec<(CompactString, u32)> = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(index, node)| match node {
                Node::File {
                    field,
                    view: View::SigmfMeta,
                    ..
                } => Some((self.path_of(index as u32), *field)),
                _ => None,
            })
            .filter_map(|(path, field)| {
                let base = path.strip_suffix(View::SigmfMeta.suffix())?;
                Some((base.into(), field))
            })
            .collect();
        streams.sort();
        streams
    }

    /// The path of node `index` below `fields/`.
    pub fn path_of(&self, index: u32) -> String {
        let mut segments = Vec::new();
        let mut at = index;
        // A tree is at most 2^24 nodes deep; the bound only guards a malformed parent chain.
        for _ in 0..self.nodes.len() {
            if at == 0 {
                break;
            }
            let Some(node) = self.node(at) else { break };
            segments.push(node.name());
            at = node.parent();
        }
        segments.reverse();
        segments.join("/")
    }

    /// The child of directory node `dir` called `name`.
    pub fn child(&self, dir: u32, name: &str) -> Option<u32> {
        child_named(&self.nodes, dir, name)
    }

    pub fn node(&self, index: u32) -> Option<&Node> {
        self.nodes.get(index as usize)
    }

    /// Size of a file node (0 for directories).
    pub fn node_len(&self, index: u32) -> u64 {
        match self.nodes.get(index as usize) {
            Some(Node::File { field, view, .. }) => self
                .fields
                .get(*field as usize)
                .map_or(0, |f| f.view_len(*view)),
            _ => 0,
        }
    }
}

/// `record.json` of a row, its fields parsed one at a time.
fn record_json_of_row(
    row: &LazyRow,
    ordinal: u64,
) -> Result<Vec<u8>, crate::format::record::RecordError> {
    let head = views::RecordHead {
        id: &row.id,
        scene_id: row.scene_id.as_deref(),
        metadata: &row.metadata,
        ordinal,
    };
    let fields = (0..row.field_count()).map(|index| {
        let name = row.field_name(index).unwrap_or_default();
        Ok((name, row.field(index)?.to_row_value()))
    });
    views::record_json_of(head, fields)
}

/// A tree's own fields, by name (labelled source fields are not the record's).
impl FieldsOf for RecordTree {
    fn field_named(&self, name: &str) -> Option<FieldRef<'_>> {
        let field = self.row.field(self.row.field_index(name)?).ok()?;
        Some(FieldRef::Parsed(std::rc::Rc::new(field)))
    }
}

/// The source's SigMF fields that `labels` (a carrier) has boxes for, as metadata-only entries.
fn labelled_source_fields(
    source: &RecordMeta,
    labels: &RowFields<'_>,
    at: &Provenance,
    names: &NamesMemo,
) -> Vec<FieldEntry> {
    source
        .fields
        .iter()
        .filter(|(name, field)| views::has_sigmf_pair(field) && !labels.contains(name))
        .filter_map(|(name, field)| {
            let layout = MetaLayout::build_from_labels(name, field, labels, at, names)?;
            Some(FieldEntry {
                name: name.clone(),
                held: Some(Box::new(field.clone())),
                raw_len: 0,
                npy_header_len: 0,
                json_len: 0,
                sigmf_meta: Some(layout),
                meta_only: true,
            })
        })
        .collect()
}

/// The entry of the row's field `name`: the sizes of its views.
fn field_entry(
    name: &str,
    field: &FieldMeta,
    record: &dyn FieldsOf,
    at: &Provenance,
    names: &NamesMemo,
) -> Result<FieldEntry, TreeError> {
    let raw_len = field.byte_len().map_err(|e| TreeError::Field {
        name: name.to_string(),
        detail: e.to_string(),
    })?;
    Ok(FieldEntry {
        name: name.to_string(),
        held: None,
        raw_len,
        npy_header_len: npy::encode_header(field.dtype, &field.shape).len() as u64,
        json_len: views::field_json(name, field).len() as u64,
        sigmf_meta: views::has_sigmf_pair(field)
            .then(|| MetaLayout::build(name, field, record, at, names)),
        meta_only: false,
    })
}

/// Builds a field tree: each field's path (see [`crate::format::names`]) with one file per view.
pub(super) struct Builder<V> {
    nodes: Vec<Node<V>>,
    /// (parent, name) → node, to find existing directories and detect clashes.
    by_name: HashMap<(u32, CompactString), u32>,
    clashes: Vec<String>,
}

impl<V> Default for Builder<V> {
    fn default() -> Self {
        Builder {
            nodes: Vec::new(),
            by_name: HashMap::new(),
            clashes: Vec::new(),
        }
    }
}

impl<V: FileView> Builder<V> {
    /// Adds field number `field`, called `name`, with one file per view; a path that clashes
    /// with an earlier one is left out and remembered.
    pub(super) fn add_files(
        &mut self,
        field: u32,
        name: &str,
        views: impl IntoIterator<Item = V>,
    ) -> Result<(), TreeError> {
        if self.nodes.is_empty() {
            self.push(Node::Dir {
                name: CompactString::default(),
                parent: 0,
                children: Vec::new(),
            })?;
        }
        let segments = encode_field_path(name);
        let Some((leaf, dirs)) = segments.split_last() else {
            return Ok(());
        };
        let mut parent = 0u32;
        for dir in dirs {
            match self.directory(parent, dir)? {
                Some(node) => parent = node,
                None => {
                    self.clashes.push(name.to_string());
                    return Ok(());
                }
            }
        }
        for view in views {
            let file = compact_str::format_compact!("{leaf}{}", view.suffix());
            if self.by_name.contains_key(&(parent, file.clone())) {
                self.clashes.push(format!("{name}{}", view.suffix()));
                continue;
            }
            let node = self.push(Node::File {
                name: file.clone(),
                parent,
                field,
                view,
            })?;
            self.link(parent, file, node);
        }
        Ok(())
    }

    /// The directory `name` under `parent`, created if absent; `None` if a file has the name.
    fn directory(&mut self, parent: u32, name: &str) -> Result<Option<u32>, TreeError> {
        if let Some(&existing) = self.by_name.get(&(parent, CompactString::from(name))) {
            let is_dir = matches!(self.nodes.get(existing as usize), Some(Node::Dir { .. }));
            return Ok(is_dir.then_some(existing));
        }
        let node = self.push(Node::Dir {
            name: name.into(),
            parent,
            children: Vec::new(),
        })?;
        self.link(parent, name.into(), node);
        Ok(Some(node))
    }

    fn push(&mut self, node: Node<V>) -> Result<u32, TreeError> {
        let limit = super::inode::MAX_LOCAL - super::inode::FIELD_NODE_BASE;
        if self.nodes.len() as u64 >= limit {
            return Err(TreeError::TooManyNodes(limit));
        }
        self.nodes.push(node);
        Ok((self.nodes.len() - 1) as u32)
    }

    fn link(&mut self, parent: u32, name: CompactString, node: u32) {
        self.by_name.insert((parent, name), node);
        if let Some(Node::Dir { children, .. }) = self.nodes.get_mut(parent as usize) {
            children.push(node);
        }
    }

    /// Sorts every directory's children by name; the nodes and the clashing paths.
    pub(super) fn finish(mut self) -> (Vec<Node<V>>, Vec<String>) {
        if self.nodes.is_empty() {
            self.nodes.push(Node::Dir {
                name: CompactString::default(),
                parent: 0,
                children: Vec::new(),
            });
        }
        let names: Vec<CompactString> = self.nodes.iter().map(|n| n.name().into()).collect();
        for node in &mut self.nodes {
            if let Node::Dir { children, .. } = node {
                children.sort_by(|a, b| names[*a as usize].cmp(&names[*b as usize]));
            }
        }
        (self.nodes, self.clashes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::dtype::DType;
    use crate::format::json::Object;
    use std::collections::BTreeMap;

    fn meta(names: &[(&str, DType, Vec<u64>)]) -> RecordMeta {
        let fields: BTreeMap<String, FieldMeta> = names
            .iter()
            .map(|(n, d, s)| (n.to_string(), FieldMeta::new(*d, s.clone())))
            .collect();
        RecordMeta {
            id: "r".into(),
            scene_id: None,
            metadata: Default::default(),
            fields,
        }
    }

    fn paths(tree: &RecordTree) -> Vec<String> {
        let mut out = Vec::new();
        fn walk(tree: &RecordTree, node: u32, prefix: &str, out: &mut Vec<String>) {
            if let Some(Node::Dir { children, .. }) = tree.node(node) {
                for &c in children {
                    let name = tree.node(c).unwrap().name();
                    let path = format!("{prefix}{name}");
                    match tree.node(c).unwrap() {
                        Node::Dir { .. } => walk(tree, c, &format!("{path}/"), out),
                        Node::File { .. } => out.push(path),
                    }
                }
            }
        }
        walk(tree, 0, "", &mut out);
        out
    }

    /// `record.json`, written field by field from the kept row, is the document built whole
    /// (the row's form of each field, the head, the ordinal) and written by the pretty writer.
    #[test]
    fn record_json_is_the_whole_document() {
        let ids = DatasetIds {
            dataset_id: "d",
            snapshot_id: "s",
        };
        let mut record = meta(&[
            ("b/iq", DType::C64, vec![4]),
            ("a \"quoted\" é", DType::F64, vec![2, 3]),
            ("z", DType::U8, vec![1]),
        ]);
        record.scene_id = Some("scene\n1".into());
        record.metadata.insert("rate".into(), 2.5e300.into());
        let fields: Object = record
            .fields
            .iter()
            .map(|(name, field)| (name.as_str().into(), field.to_row_value()))
            .collect();
        let mut whole = Object::new();
        whole.insert("fields".into(), fields.into());
        whole.insert("id".into(), "r".into());
        whole.insert("metadata".into(), record.metadata.clone().into());
        whole.insert("ordinal".into(), 7u64.into());
        whole.insert("scene_id".into(), "scene\n1".into());
        let expected = crate::format::json::object_to_pretty(&whole).into_bytes();
        let tree = RecordTree::build(7, record, ids).unwrap();
        assert_eq!(tree.record_json().unwrap(), expected);
        assert_eq!(tree.record_json_len(), expected.len() as u64);
    }

    #[test]
    fn fields_become_a_sorted_tree_with_views() {
        let ids = DatasetIds {
            dataset_id: "d",
            snapshot_id: "s",
        };
        let tree = RecordTree::build(
            3,
            meta(&[
                ("projections/rx0/iq", DType::C64, vec![4]),
                ("projections/rx0/iq/coordinates/t", DType::F64, vec![4]),
                ("x.raw/y", DType::U8, vec![2]),
                ("x", DType::I16, vec![1, 2]),
            ]),
            ids,
        )
        .unwrap();
        assert!(tree.clashes.is_empty());
        assert_eq!(tree.sigmf_streams, vec![("projections/rx0/iq".into(), 0)]);
        assert_eq!(
            paths(&tree),
            vec![
                "projections/rx0/iq/coordinates/t.json",
                "projections/rx0/iq/coordinates/t.npy",
                "projections/rx0/iq/coordinates/t.raw",
                "projections/rx0/iq.json",
                "projections/rx0/iq.npy",
                "projections/rx0/iq.raw",
                "projections/rx0/iq.sigmf-data",
                "projections/rx0/iq.sigmf-meta",
                "projections/rx0/iq.spectrogram.png",
                "x%2Eraw/y.json",
                "x%2Eraw/y.npy",
                "x%2Eraw/y.raw",
                "x.json",
                "x.npy",
                "x.raw",
            ]
        );
        let projections = tree.child(0, "projections").unwrap();
        let rx0 = tree.child(projections, "rx0").unwrap();
        let raw = tree.child(rx0, "iq.raw").unwrap();
        assert_eq!(tree.node_len(raw), 32);
        let npy = tree.child(rx0, "iq.npy").unwrap();
        assert_eq!(tree.node_len(npy), 128 + 32);
        let png = tree.child(rx0, "iq.spectrogram.png").unwrap();
        assert_eq!(tree.node_len(png), picture::spectrogram_len());
        assert_eq!(tree.child(rx0, "missing"), None);
    }
}
