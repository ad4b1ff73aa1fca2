//! Where a Keras file keeps each recurrent layer's `kernel`, `recurrent_kernel` and
//! `bias`, in its two layouts, and their conversion into PyTorch's layout with every
//! shape checked.
//!
//! - Keras 2 (and Keras 3's legacy `.h5`): `{root}/{layer}` has a `weight_names`
//!   attribute (`lstm/lstm_cell/kernel:0`, ...; a `Bidirectional`'s forward weights then
//!   its backward ones) and each weight is the dataset `{root}/{layer}/{weight name}`.
//! - Keras 3: `layers/{group}/cell/vars/{0,1,2}` (kernel, recurrent kernel, bias) or,
//!   for a `Bidirectional`, `layers/{group}/{forward,backward}_layer/cell/vars/...`;
//!   `layers/{group}/vars` carries the layer's name as its `name` attribute (the group
//!   itself is named after the class: `lstm`, `lstm_1`, ...).
//!
//! A nested model (a model used as a layer) keeps its layers' weights in its own
//! group: in Keras 2's layout one `weight_names` list for all of them (told apart by
//! their names), in Keras 3's its own `layers/` (`layers/functional/layers/lstm`). A
//! subclassed Keras 3 model keeps a layer under its attribute's name (`encoder/cell/
//! vars/0`) when Keras's alphabetical walk of the attributes meets it before `layers`.

use crate::error::RnnError;
use crate::import::MAX_UNITS;
use crate::import::gates::{
    KERAS_GRU, KERAS_LSTM, cudnn_input_kernel, cudnn_recurrent_kernel, keras_kernel, reorder,
};
use crate::import::hdf5::{H5, io};
use crate::import::host::{DirectionParams, HostTensor};
use crate::import::keras_config::{LayerEntry, MAX_NESTING, cell_name, identity_by_name, setting};
use crate::import::keras_file::WeightLayout;
use crate::op::spec::CellKind;

/// The datasets of one direction of a layer.
#[derive(Debug, Clone)]
pub(crate) struct DirectionPaths {
    pub kernel: String,
    pub recurrent_kernel: String,
    pub bias: Option<String>,
}

/// The datasets of one recurrent layer.
#[derive(Debug, Clone)]
pub(crate) struct LayerPaths {
    /// The layer's name: as the file names it (a nested model's layer: `outer/inner`),
    /// else its group's (tf-keras's Keras-3-style files name no layer).
    pub name: String,
    pub place: Place,
    /// Where the layer sits among all the model's layers, as far as the file tells
    /// (Keras 2's `layer_names` list every top-level layer): two layers stack without
    /// an architecture only when their slots are consecutive. `None` in a nested
    /// model's group (which shows neither its layers without weights nor their order)
    /// and in Keras 3's layout, which keeps no order between groups.
    pub slot: Option<usize>,
    pub forward: DirectionPaths,
    pub backward: Option<DirectionPaths>,
}

/// Where a layer's weights sit in the file, to match it to the architecture's layer.
#[derive(Debug, Clone)]
pub(crate) enum Place {
    /// Keras 2's layout: the group of the top-level layer (a nested model's group holds
    /// all its layers' weights) and the scope of the layer's weight names, its own name
    /// last (`lstm`; Keras 3's legacy files name the models around it too:
    /// `sequential/enc/lstm`).
    Legacy { group: String, scope: Vec<String> },
    /// Keras 3's: the group below `layers/` (`functional/layers/lstm` in a nested model)
    /// and whether the file names its layers (tf-keras's files do not: their groups are
    /// matched to the architecture by class and position, as Keras does).
    Native { group: String, named: bool },
}

impl LayerPaths {
    /// Whether these can be the weights of the architecture's layer `entry`: in Keras
    /// 2's layout, a nested layer's path below its top-level model and the weights'
    /// scope (or the scope less a last part, a cell's the user named) agree as far as
    /// both go (Keras 2 names the layer alone, Keras 3 the models around it too);
    /// layers that agree alike are told apart by order.
    pub fn belong_to(&self, entry: &LayerEntry) -> bool {
        match &self.place {
            Place::Legacy { group, scope } => match entry.path.as_slice() {
                [top] => top == group,
                [top, below @ ..] => {
                    let agree = |scope: &[String]| {
                        let n = below.len().min(scope.len());
                        n > 0 && below[below.len() - n..] == scope[scope.len() - n..]
                    };
                    // The scope may end in a cell the user named (`rnn/enc_cell`).
                    top == group
                        && (agree(scope) || scope.split_last().is_some_and(|(_, s)| agree(s)))
                }
                [] => false,
            },
            Place::Native { named: true, .. } => self.name == entry.name,
            Place::Native {
                group,
                named: false,
            } => *group == entry.native_group,
        }
    }
}

/// Every layer of the file that holds recurrent weights, in the file's order.
pub(crate) fn recurrent_layers(
    h5: &H5,
    layout: &WeightLayout,
) -> Result<Vec<LayerPaths>, RnnError> {
    match layout {
        WeightLayout::Legacy { root } => legacy(h5, root),
        WeightLayout::Native => {
            let mut out = Vec::new();
            native(h5, "", &[], "", &mut 0, &mut out)?;
            Ok(out)
        }
    }
}

fn join(root: &str, rest: &str) -> String {
    if root.is_empty() {
        rest.to_string()
    } else {
        format!("{root}/{rest}")
    }
}

fn legacy(h5: &H5, root: &str) -> Result<Vec<LayerPaths>, RnnError> {
    let names = h5.attr_strings(root, "layer_names")?.ok_or_else(|| {
        io(
            h5.source(),
            format!("no 'layer_names' attribute on '/{root}'"),
        )
    })?;
    let mut out = Vec::new();
    let mut slot = 0;
    for name in names {
        let group = join(root, &name);
        let weight_names = h5.attr_strings(&group, "weight_names")?.unwrap_or_default();
        let weights: Vec<LegacyWeight> = weight_names
            .iter()
            .map(|w| LegacyWeight::new(w, &group))
            .collect();
        let (layers, slots) = legacy_layers(&weights).ok_or_else(|| {
            io(
                h5.source(),
                format!(
                    "layer '{name}': weight_names {weight_names:?} are not recurrent layers' \
                     kernel, recurrent_kernel and bias"
                ),
            )
        })?;
        // A group of one layer keeps the group's name (the layer's own, or a nested
        // model's of one layer); a nested model's layers are `model/layer`.
        let single = layers.len() == 1;
        // A group that is one layer (its weights scoped by its own name) has a place
        // among the model's layers. A nested model's group does not show its layers
        // without weights (an `Activation` between two LSTMs), and holds a frozen
        // layer's weights after the others': its layers have no known order.
        let own = single && layers[0].scope.last() == Some(&name);
        for layer in layers {
            let leaf = layer.scope.last().cloned().unwrap_or_default();
            out.push(LayerPaths {
                name: if single {
                    name.clone()
                } else {
                    format!("{name}/{leaf}")
                },
                place: Place::Legacy {
                    group: name.clone(),
                    scope: layer.scope,
                },
                slot: own.then_some(slot + layer.slot),
                forward: layer.forward,
                backward: layer.backward,
            });
        }
        // A layer without weights is seen by its name alone: Keras's names for dropout
        // layers take no slot (they pass their input through at inference), any other
        // name (an `Activation`, a `Masking`, a renamed `Dropout`) one.
        slot += if weight_names.is_empty() {
            usize::from(!identity_by_name(&name))
        } else {
            slots
        };
    }
    Ok(out)
}

/// One entry of a Keras 2 group's `weight_names`: `scope/.../role:0`.
struct LegacyWeight {
    /// The components before the role, less a trailing `lstm_cell` or `gru_cell` (or
    /// `lstm_cell_1`, a cell tf-keras numbered) unless the cell is one of a
    /// `StackedRNNCells`', whose own component is left out instead
    /// (`rnn/stacked_rnn_cells/gru_cell_1` → `rnn/gru_cell_1`: the cells are the
    /// layers, named as the architecture names them).
    scope: Vec<String>,
    role: String,
    path: String,
    /// A cell of stacked cells inside a `Bidirectional`
    /// (`bi/forward_rnn/stacked_rnn_cells/lstm_cell/kernel:0`).
    bidirectional_stack: bool,
}

impl LegacyWeight {
    fn new(name: &str, group: &str) -> Self {
        let mut scope: Vec<String> = name.split('/').map(str::to_string).collect();
        let last = scope.pop().unwrap_or_default();
        let role = last.split(':').next().unwrap_or(&last).to_string();
        let is_cell = |c: &str| {
            let stem = match c.rsplit_once('_') {
                Some((stem, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => stem,
                _ => c,
            };
            matches!(stem, "lstm_cell" | "gru_cell")
        };
        let stacked = scope.len() > 1 && scope[scope.len() - 2].starts_with("stacked_rnn_cells");
        let bidirectional_stack = stacked
            && scope[..scope.len() - 2]
                .iter()
                .any(|c| c.starts_with("forward_") || c.starts_with("backward_"));
        if stacked {
            scope.remove(scope.len() - 2);
        } else if scope.len() > 1 && scope.last().is_some_and(|c| is_cell(c)) {
            scope.pop();
        }
        Self {
            scope,
            role,
            path: join(group, name),
            bidirectional_stack,
        }
    }
}

/// One recurrent layer found in a Keras 2 group.
struct LegacyLayer {
    /// The scope of its weights' names, the layer's own name last (a
    /// `Bidirectional`'s: the scope of its two layers).
    scope: Vec<String>,
    /// Its position among the group's layers, counting each run of other layers'
    /// weights as one.
    slot: usize,
    forward: DirectionPaths,
    backward: Option<DirectionPaths>,
}

/// The recurrent layers among a group's weights, in order: each direction is a
/// `kernel`, `recurrent_kernel` (and `bias`) of one scope; a `Bidirectional` is a
/// direction scoped `.../forward_*` right before one scoped `.../backward_*` (Keras
/// names its two layers so). Other layers' weights (a nested model's `Dense`, a
/// `Bidirectional` of stacked cells) are passed over, each run of them taking a slot; also returns how many slots the group
/// takes (none without weights: a `Dropout`'s or `Masking`'s). `None` when a recurrent
/// kernel is left over.
fn legacy_layers(weights: &[LegacyWeight]) -> Option<(Vec<LegacyLayer>, usize)> {
    // Each direction with the number of runs of other layers' weights before it.
    let mut directions: Vec<(&[String], DirectionPaths, usize)> = Vec::new();
    let mut at = 0;
    let mut runs = 0;
    let mut other = false;
    while at < weights.len() {
        let same = |k: usize, role: &str| {
            weights
                .get(at + k)
                .is_some_and(|w| w.role == role && w.scope == weights[at].scope)
        };
        // A Bidirectional of stacked cells runs each direction through the whole
        // stack, which no cuDNN stack does: its weights are another layer's.
        if weights[at].bidirectional_stack {
            other = true;
            at += 1;
            continue;
        }
        if weights[at].role == "recurrent_kernel" {
            return None;
        }
        if !(weights[at].role == "kernel" && same(1, "recurrent_kernel")) {
            other = true;
            at += 1;
            continue;
        }
        if other {
            runs += 1;
            other = false;
        }
        let bias = same(2, "bias").then(|| weights[at + 2].path.clone());
        directions.push((
            &weights[at].scope,
            DirectionPaths {
                kernel: weights[at].path.clone(),
                recurrent_kernel: weights[at + 1].path.clone(),
                bias: bias.clone(),
            },
            runs,
        ));
        at += 2 + usize::from(bias.is_some());
    }
    let runs = runs + usize::from(other);
    let split = |scope: &[String], prefix: &str| match scope {
        [outer @ .., own] if !outer.is_empty() && own.starts_with(prefix) => Some(outer.to_vec()),
        _ => None,
    };
    let mut layers = Vec::new();
    let mut directions = directions.into_iter().peekable();
    while let Some((scope, forward, runs_before)) = directions.next() {
        let outer = split(scope, "forward_");
        let backward = directions
            .next_if(|(next, ..)| outer.is_some() && split(next, "backward_") == outer)
            .map(|(_, paths, _)| paths);
        let scope = match (&backward, outer) {
            (Some(_), Some(outer)) => outer,
            _ => scope.to_vec(),
        };
        layers.push(LegacyLayer {
            scope,
            slot: layers.len() + runs_before,
            forward,
            backward,
        });
    }
    let slots = layers.len() + runs;
    Some((layers, slots))
}

/// The groups a model's layer list is saved under: Keras 3's and tf-keras 2.15's
/// `layers`, tf-keras 2.13's `_layer_checkpoint_dependencies`.
const LAYER_LISTS: [&str; 2] = ["layers", "_layer_checkpoint_dependencies"];

/// A direction's weights in a Keras 3 `vars` group (`0`, `1` and, with a bias, `2`:
/// kernel, recurrent kernel, bias), when it has a recurrent kernel.
fn vars_direction(h5: &H5, vars: &str) -> Result<Option<DirectionPaths>, RnnError> {
    let Some((_, datasets)) = h5.members(vars)? else {
        return Ok(None);
    };
    if !datasets.iter().any(|d| d == "1") {
        return Ok(None);
    }
    Ok(Some(DirectionPaths {
        kernel: format!("{vars}/0"),
        recurrent_kernel: format!("{vars}/1"),
        bias: datasets
            .iter()
            .any(|d| d == "2")
            .then(|| format!("{vars}/2")),
    }))
}

/// The groups of a list, named as the architecture names them: by class and rank in
/// the list (`lstm`, `lstm_1`), whatever numbers the file gave them (tf-keras 2.13
/// numbers a layer with weights twice: `lstm`, `lstm_2` for two LSTMs).
#[derive(Default)]
struct Ranks(std::collections::HashMap<String, usize>);

impl Ranks {
    /// The name of `group`, the next of its class (groups given in the file's order).
    fn next(&mut self, group: &str) -> String {
        let stem = stem_number(group).0.to_string();
        let rank = self.0.entry(stem.clone()).or_insert(0);
        let name = match *rank {
            0 => stem,
            k => format!("{stem}_{k}"),
        };
        *rank += 1;
        name
    }
}

/// A list group's name split into its class's snake-case stem and its number
/// (`lstm_2` → `lstm`, 2; `lstm` → `lstm`, 0).
fn stem_number(group: &str) -> (&str, u64) {
    match group.rsplit_once('_') {
        Some((stem, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => (
            stem,
            n.parse::<u64>().map_or(u64::MAX, |n| n.saturating_add(1)),
        ),
        _ => (group, 0),
    }
}

/// How many layer groups a Keras 3 file's walk visits at most: groups linked from
/// several places are visited once per place.
const MAX_GROUP_VISITS: usize = 16_384;

/// Appends the recurrent layers of the object whose state is the group `prefix` (the
/// model at `""`): those of its `layers/` list (a Sequential's or functional model's),
/// named by their `vars`' `name` attribute, else by their group, then those of its
/// other attributes (a subclassed model's `self.encoder`), named by the attribute; a
/// group that is neither a recurrent layer nor a `Bidirectional` is searched in turn
/// (a nested model, a list of layers). `names`: the names of the objects around;
/// `group`: the object's group as the architecture names it (`LayerEntry::
/// native_group`); `visits` counts the groups visited.
fn native(
    h5: &H5,
    prefix: &str,
    names: &[String],
    group: &str,
    visits: &mut usize,
    out: &mut Vec<LayerPaths>,
) -> Result<(), RnnError> {
    let Some((children, _)) = h5.members(prefix)? else {
        return Ok(());
    };
    if names.len() > MAX_NESTING {
        return Err(io(
            h5.source(),
            format!(
                "'/{prefix}': groups nested more than {MAX_NESTING} deep (models, layers \
                 and the layers they hold)"
            ),
        ));
    }
    let list_name = LAYER_LISTS
        .iter()
        .find(|l| children.iter().any(|c| c == *l));
    let list = join(prefix, list_name.copied().unwrap_or("layers"));
    let listed = match list_name {
        Some(_) => h5.members(&list)?.unwrap_or_default().0,
        None => Vec::new(),
    };
    // Counted before any member is read.
    *visits += listed.len() + children.len();
    if *visits > MAX_GROUP_VISITS {
        return Err(io(
            h5.source(),
            format!("more than {MAX_GROUP_VISITS} layer groups (groups linked from many places)"),
        ));
    }
    // h5py lists members alphabetically; Keras numbers a list's groups in order
    // (`lstm`, `lstm_1`, ..., `lstm_10`): sort by stem, then number.
    let numbered = |mut groups: Vec<String>| {
        groups.sort_by(|a, b| stem_number(a).cmp(&stem_number(b)));
        groups
    };
    // (path, name, whether the file names it, group as the architecture names it)
    let mut members: Vec<(String, String, bool, String)> = Vec::new();
    let mut ranks = Ranks::default();
    let list_group = if group.is_empty() {
        String::new()
    } else {
        format!("{group}/layers")
    };
    for member in numbered(listed) {
        let path = join(&list, &member);
        let named = h5
            .attr_strings(&format!("{path}/vars"), "name")?
            .and_then(|v| v.into_iter().next());
        let ranked = ranks.next(&member);
        let name = named.clone().unwrap_or(member);
        members.push((path, name, named.is_some(), join(&list_group, &ranked)));
    }
    for child in numbered(children) {
        if !LAYER_LISTS.contains(&child.as_str()) && child != "vars" {
            let inner = join(group, &child);
            members.push((join(prefix, &child), child, true, inner));
        }
    }
    let cell = |base: &str| vars_direction(h5, &format!("{base}/cell/vars"));
    for (path, name, named, inner_group) in members {
        let mut inner_names = names.to_vec();
        inner_names.push(name);
        if stacked_cells(h5, &path, &inner_names, &inner_group, named, visits, out)? {
            continue;
        }
        let (forward, backward) = if let Some(forward) = cell(&path)? {
            (forward, None)
        } else if let (Some(forward), Some(backward)) = (
            cell(&format!("{path}/forward_layer"))?,
            cell(&format!("{path}/backward_layer"))?,
        ) {
            (forward, Some(backward))
        } else if h5.has_group(&format!("{path}/forward_layer")) {
            // A Bidirectional of what does not load (stacked cells: each direction runs
            // the whole stack): not searched for layers.
            continue;
        } else {
            native(h5, &path, &inner_names, &inner_group, visits, out)?;
            continue;
        };
        out.push(LayerPaths {
            name: inner_names.join("/"),
            place: Place::Native {
                group: inner_group,
                named,
            },
            slot: None,
            forward,
            backward,
        });
    }
    Ok(())
}

/// Appends the cells of an `RNN` of a `StackedRNNCells` kept in the group `path`
/// (`{path}/cell/cells/lstm_cell_1/vars/0..2`, numbered by class), each a layer named
/// `rnn/cell` by its `vars`' name; whether `path` is one.
fn stacked_cells(
    h5: &H5,
    path: &str,
    names: &[String],
    group: &str,
    named: bool,
    visits: &mut usize,
    out: &mut Vec<LayerPaths>,
) -> Result<bool, RnnError> {
    let list = format!("{path}/cell/cells");
    let Some((cells, _)) = h5.members(&list)? else {
        return Ok(false);
    };
    *visits += cells.len();
    if *visits > MAX_GROUP_VISITS {
        return Err(io(
            h5.source(),
            format!("more than {MAX_GROUP_VISITS} layer groups (groups linked from many places)"),
        ));
    }
    let mut cells = cells;
    cells.sort_by(|a, b| stem_number(a).cmp(&stem_number(b)));
    let mut ranks = Ranks::default();
    for cell in cells {
        let vars = format!("{list}/{cell}/vars");
        let Some(forward) = vars_direction(h5, &vars)? else {
            continue;
        };
        let ranked = ranks.next(&cell);
        let own = h5
            .attr_strings(&vars, "name")?
            .and_then(|v| v.into_iter().next());
        let mut cell_names = names.to_vec();
        cell_names.push(own.clone().unwrap_or(cell));
        out.push(LayerPaths {
            name: cell_names.join("/"),
            place: Place::Native {
                group: format!("{group}/cell/cells/{ranked}"),
                named: named && own.is_some(),
            },
            slot: None,
            forward,
            backward: None,
        });
    }
    Ok(true)
}

/// What the weights of a layer say about it.
#[derive(Debug, Clone)]
pub(crate) struct LoadedLayer {
    pub cell: CellKind,
    pub cudnn: bool,
    pub input_size: usize,
    pub units: usize,
    pub bias: bool,
    pub forward: DirectionParams,
    pub backward: Option<DirectionParams>,
}

/// What the architecture says a layer is, when the file has one.
pub(crate) struct Expected {
    pub cell: CellKind,
    pub cudnn: bool,
    pub units: usize,
    pub bias: bool,
}

/// Reads a layer's weights, checks every shape (against `expected` when the
/// architecture is known, else against each other) and converts them.
pub(crate) fn load(
    h5: &H5,
    source: &str,
    paths: &LayerPaths,
    expected: Option<&Expected>,
) -> Result<LoadedLayer, RnnError> {
    let forward = load_direction(h5, source, &paths.name, &paths.forward, expected)?;
    let backward = paths
        .backward
        .as_ref()
        .map(|b| load_direction(h5, source, &paths.name, b, expected))
        .transpose()?;
    if let Some(b) = &backward {
        same_kind(source, &paths.name, &forward, b)?;
    }
    Ok(LoadedLayer {
        backward: backward.map(|b| b.params),
        cell: forward.cell,
        cudnn: forward.cudnn,
        input_size: forward.input_size,
        units: forward.units,
        bias: forward.bias,
        forward: forward.params,
    })
}

/// Refuses a backward direction that differs from the forward one in kind, size, bias or
/// layout, naming what each holds.
fn same_kind(
    source: &str,
    layer: &str,
    forward: &Direction,
    backward: &Direction,
) -> Result<(), RnnError> {
    let kind = |d: &Direction| (d.cell, d.units, d.input_size, d.bias, d.cudnn);
    if kind(forward) == kind(backward) {
        return Ok(());
    }
    Err(RnnError::invalid(
        setting(source, layer, "backward weights"),
        format!(
            "the forward direction's kind, sizes, bias and layout ({})",
            forward.describe()
        ),
        backward.describe(),
    ))
}

struct Direction {
    cell: CellKind,
    cudnn: bool,
    input_size: usize,
    units: usize,
    bias: bool,
    params: DirectionParams,
}

impl Direction {
    /// Its kind, sizes, bias and layout, for errors: `LSTM of 8 units, input 3, with
    /// bias, Keras layout`.
    fn describe(&self) -> String {
        format!(
            "{} of {} units, input {}, {} bias, {} layout",
            cell_name(self.cell),
            self.units,
            self.input_size,
            if self.bias { "with" } else { "without" },
            if self.cudnn { "cuDNN" } else { "Keras" },
        )
    }
}

fn load_direction(
    h5: &H5,
    source: &str,
    layer: &str,
    paths: &DirectionPaths,
    expected: Option<&Expected>,
) -> Result<Direction, RnnError> {
    let read = |path: &str| -> Result<HostTensor, RnnError> {
        h5.dataset(path)?.ok_or_else(|| RnnError::CheckpointTensor {
            source_name: h5.source().to_string(),
            problem: "missing",
            name: format!("/{path}"),
            hint: Some(format!("a weight of Keras layer '{layer}'")),
        })
    };
    let shape_error =
        |role: &str, path: &str, expected: Vec<usize>, actual: &[usize]| RnnError::ParameterShape {
            name: format!("{source}: Keras layer '{layer}' {role} (/{path})"),
            expected,
            actual: actual.to_vec(),
        };
    let recurrent = read(&paths.recurrent_kernel)?;
    let kernel = read(&paths.kernel)?;
    let bias = paths.bias.as_deref().map(read).transpose()?;
    if let Some(e) = expected
        && e.bias != bias.is_some()
    {
        return Err(RnnError::CheckpointTensor {
            source_name: h5.source().to_string(),
            problem: if e.bias { "missing" } else { "unexpected" },
            name: format!("bias of Keras layer '{layer}'"),
            hint: Some(format!("the layer's use_bias is {}", e.bias)),
        });
    }
    // The recurrent kernel gives the units and, without an architecture, the cell.
    let (h, cell) = match (expected, recurrent.shape.as_slice()) {
        (Some(e), _) => (e.units, e.cell),
        // Units bounded first: no product below overflows, whatever extent the file claims.
        (None, &[rows, cols]) if (1..=MAX_UNITS).contains(&rows) && cols == 4 * rows => {
            (rows, CellKind::Lstm)
        }
        (None, &[rows, cols]) if (1..=MAX_UNITS).contains(&rows) && cols == 3 * rows => {
            (rows, CellKind::Gru)
        }
        (None, actual) => {
            let rows = actual.first().copied().unwrap_or(0);
            return Err(shape_error(
                "recurrent_kernel",
                &paths.recurrent_kernel,
                vec![rows, rows.saturating_mul(4)],
                actual,
            ));
        }
    };
    let gates = match cell {
        CellKind::Lstm => 4,
        CellKind::Gru => 3,
    };
    if recurrent.shape != [h, gates * h] {
        return Err(shape_error(
            "recurrent_kernel",
            &paths.recurrent_kernel,
            vec![h, gates * h],
            &recurrent.shape,
        ));
    }
    let input_size = match kernel.shape.as_slice() {
        &[rows, cols] if cols == gates * h && rows > 0 => rows,
        actual => {
            return Err(shape_error(
                "kernel",
                &paths.kernel,
                vec![actual.first().copied().unwrap_or(1).max(1), gates * h],
                actual,
            ));
        }
    };
    // The bias tells a cuDNN layer (two halves) from a plain one.
    let expected_cudnn = expected.map(|e| e.cudnn);
    let (cudnn, bias_ih, bias_hh) = match (&bias, cell) {
        (None, _) => (expected_cudnn.unwrap_or(false), None, None),
        (Some(b), CellKind::Lstm) => {
            let plain = b.shape == [4 * h];
            let cudnn = b.shape == [8 * h];
            match (plain, cudnn, expected_cudnn) {
                (true, _, None | Some(false)) => (
                    false,
                    Some(reorder(&b.values, &KERAS_LSTM)),
                    Some(vec![0.0; 4 * h]),
                ),
                (_, true, None | Some(true)) => (
                    true,
                    Some(reorder(&b.values[..4 * h], &KERAS_LSTM)),
                    Some(reorder(&b.values[4 * h..], &KERAS_LSTM)),
                ),
                _ => {
                    let want = if expected_cudnn == Some(true) {
                        8 * h
                    } else {
                        4 * h
                    };
                    return Err(shape_error(
                        "bias",
                        paths.bias.as_deref().unwrap_or(""),
                        vec![want],
                        &b.shape,
                    ));
                }
            }
        }
        (Some(b), CellKind::Gru) => {
            let plain = b.shape == [2, 3 * h];
            let cudnn = b.shape == [6 * h];
            match (plain, cudnn, expected_cudnn) {
                (true, _, None | Some(false)) | (_, true, None | Some(true)) => (
                    cudnn && !plain,
                    Some(reorder(&b.values[..3 * h], &KERAS_GRU)),
                    Some(reorder(&b.values[3 * h..], &KERAS_GRU)),
                ),
                _ if b.shape == [3 * h] => {
                    return Err(RnnError::invalid(
                        setting(source, layer, "reset_after"),
                        "true (a bias of shape [2, 3*units]; cuDNN's and PyTorch's GRU apply \
                         the reset gate after the recurrent product)",
                        format!("false (a bias of shape [{}])", 3 * h),
                    ));
                }
                _ => {
                    let want = if expected_cudnn == Some(true) {
                        vec![6 * h]
                    } else {
                        vec![2, 3 * h]
                    };
                    return Err(shape_error(
                        "bias",
                        paths.bias.as_deref().unwrap_or(""),
                        want,
                        &b.shape,
                    ));
                }
            }
        }
    };
    let order: &[usize] = match cell {
        CellKind::Lstm => &KERAS_LSTM,
        CellKind::Gru => &KERAS_GRU,
    };
    let (weight_ih, weight_hh) = if cudnn {
        (
            cudnn_input_kernel(&kernel, order),
            cudnn_recurrent_kernel(&recurrent, order),
        )
    } else {
        (
            keras_kernel(&kernel, order),
            keras_kernel(&recurrent, order),
        )
    };
    Ok(Direction {
        cell,
        cudnn,
        input_size,
        units: h,
        bias: bias_ih.is_some(),
        params: DirectionParams {
            weight_ih,
            weight_hh,
            bias_ih,
            bias_hh,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direction(bias: bool, cudnn: bool, units: usize) -> Direction {
        let empty = HostTensor {
            shape: vec![0],
            values: Vec::new(),
        };
        Direction {
            cell: CellKind::Lstm,
            cudnn,
            input_size: 3,
            units,
            bias,
            params: DirectionParams {
                weight_ih: empty.clone(),
                weight_hh: empty,
                bias_ih: None,
                bias_hh: None,
            },
        }
    }

    /// `(leaf, forward kernel, backward kernel)` of each layer `legacy_layers` finds in
    /// a group `g` whose `weight_names` are `names`.
    fn legacy(names: &[&str]) -> Option<Vec<(String, String, Option<String>)>> {
        let weights: Vec<LegacyWeight> = names.iter().map(|n| LegacyWeight::new(n, "g")).collect();
        Some(
            legacy_layers(&weights)?
                .0
                .into_iter()
                .map(|l| {
                    let leaf = l.scope.last().cloned().unwrap_or_default();
                    (leaf, l.forward.kernel, l.backward.map(|b| b.kernel))
                })
                .collect(),
        )
    }

    fn layer(
        leaf: &str,
        forward: &str,
        backward: Option<&str>,
    ) -> (String, String, Option<String>) {
        (
            leaf.to_string(),
            format!("g/{forward}"),
            backward.map(|b| format!("g/{b}")),
        )
    }

    #[test]
    fn a_keras_2_group_holds_one_layer_a_bidirectional_or_a_nested_models_layers() {
        let cell = |scope: &str| {
            ["kernel:0", "recurrent_kernel:0", "bias:0"].map(|r| format!("{scope}/{r}"))
        };
        let names =
            |scopes: &[&str]| -> Vec<String> { scopes.iter().flat_map(|s| cell(s)).collect() };
        let run = |scopes: &[&str]| {
            let names = names(scopes);
            legacy(&names.iter().map(String::as_str).collect::<Vec<_>>())
        };
        // One layer: Keras 2 (`lstm/lstm_cell`), cuDNN's (no cell), Keras 3 in a
        // Sequential (`model/layer/cell`).
        assert_eq!(
            run(&["lstm/lstm_cell"]),
            Some(vec![layer("lstm", "lstm/lstm_cell/kernel:0", None)])
        );
        assert_eq!(
            run(&["cudnn_lstm"]),
            Some(vec![layer("cudnn_lstm", "cudnn_lstm/kernel:0", None)])
        );
        assert_eq!(run(&["seq/gru_a/gru_cell"]).unwrap()[0].0, "gru_a");
        // tf-keras numbers the cells users create (`RNN(LSTMCell(4))`).
        assert_eq!(run(&["rnn_1/lstm_cell_1"]).unwrap()[0].0, "rnn_1");
        // A StackedRNNCells' cells are its layers, scoped as the architecture names
        // them (`rnn_2/gru_cell_1`, also inside a nested model).
        let found = run(&[
            "rnn_2/stacked_rnn_cells/gru_cell",
            "rnn_2/stacked_rnn_cells/gru_cell_1",
        ])
        .unwrap();
        let leaves: Vec<&str> = found.iter().map(|(leaf, ..)| leaf.as_str()).collect();
        assert_eq!(leaves, ["gru_cell", "gru_cell_1"]);
        let scope = LegacyWeight::new("seq/enc/s/stacked_rnn_cells/lstm_cell_1/kernel", "g").scope;
        assert_eq!(scope, ["seq", "enc", "s", "lstm_cell_1"]);
        // A Bidirectional of stacked cells is no layer of cuDNN's: passed over.
        assert_eq!(
            run(&[
                "bi/forward_rnn/stacked_rnn_cells/lstm_cell",
                "bi/forward_rnn/stacked_rnn_cells/lstm_cell_1",
                "bi/backward_rnn/stacked_rnn_cells/lstm_cell",
                "bi/backward_rnn/stacked_rnn_cells/lstm_cell_1",
            ]),
            Some(vec![])
        );
        // A Bidirectional, under any name (`backward_enc` too).
        for bi in ["bigru", "backward_enc", "outer/forward_x"] {
            let scopes = [
                format!("{bi}/forward_gru/gru_cell"),
                format!("{bi}/backward_gru/gru_cell"),
            ];
            let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
            let own = bi.rsplit('/').next().unwrap();
            assert_eq!(
                run(&scopes),
                Some(vec![layer(
                    own,
                    &format!("{bi}/forward_gru/gru_cell/kernel:0"),
                    Some(&format!("{bi}/backward_gru/gru_cell/kernel:0"))
                )]),
                "{bi}"
            );
        }
        // A nested model: its layers in order, a Bidirectional among them.
        assert_eq!(
            run(&["lstm/lstm_cell", "lstm_1/lstm_cell"]),
            Some(vec![
                layer("lstm", "lstm/lstm_cell/kernel:0", None),
                layer("lstm_1", "lstm_1/lstm_cell/kernel:0", None),
            ])
        );
        let found = run(&[
            "bi/forward_lstm/lstm_cell",
            "bi/backward_lstm/lstm_cell",
            "top/lstm_cell",
        ])
        .unwrap();
        let leaves: Vec<(&str, bool)> = found
            .iter()
            .map(|(leaf, _, backward)| (leaf.as_str(), backward.is_some()))
            .collect();
        assert_eq!(leaves, [("bi", true), ("top", false)]);
        // A forward layer without its backward one is a layer of its own name; two
        // backward ones do not pair.
        let leaves = |found: Vec<(String, String, Option<String>)>| -> Vec<(String, bool)> {
            found
                .into_iter()
                .map(|(l, _, b)| (l, b.is_some()))
                .collect()
        };
        assert_eq!(
            leaves(run(&["m/forward_a/lstm_cell", "m/other/lstm_cell"]).unwrap()),
            [
                ("forward_a".to_string(), false),
                ("other".to_string(), false)
            ]
        );
        assert_eq!(
            leaves(run(&["m/backward_a/lstm_cell", "m/backward_b/lstm_cell"]).unwrap()),
            [
                ("backward_a".to_string(), false),
                ("backward_b".to_string(), false)
            ]
        );
        // A Dense in the nested model is passed over; a bias-less layer has two weights.
        assert_eq!(
            legacy(&[
                "dense/kernel:0",
                "dense/bias:0",
                "lstm/lstm_cell/kernel:0",
                "lstm/lstm_cell/recurrent_kernel:0",
                "embedding/embeddings:0",
            ]),
            Some(vec![layer("lstm", "lstm/lstm_cell/kernel:0", None)])
        );
        // Only a cell's own scope is taken off: a cuDNN Bidirectional named `enc_cell`
        // (no cell scope) keeps its two directions.
        let found = legacy(&[
            "bidirectional/forward_enc_cell/kernel:0",
            "bidirectional/forward_enc_cell/recurrent_kernel:0",
            "bidirectional/backward_enc_cell/kernel:0",
            "bidirectional/backward_enc_cell/recurrent_kernel:0",
        ])
        .unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "bidirectional");
        assert!(found[0].2.is_some());
        // A recurrent kernel no kernel of its scope comes before is not read as anything.
        assert_eq!(legacy(&["a/kernel:0", "b/recurrent_kernel:0"]), None);
        assert_eq!(legacy(&["a/recurrent_kernel:0"]), None);
        assert_eq!(legacy(&[]), Some(vec![]));
    }

    /// A group's layers take consecutive slots unless other layers' weights sit
    /// between them; a group takes as many slots as its layers and runs of others.
    #[test]
    fn layers_with_weights_between_recurrent_layers_take_a_slot() {
        let slots = |names: &[&str]| {
            let weights: Vec<LegacyWeight> =
                names.iter().map(|n| LegacyWeight::new(n, "g")).collect();
            let (layers, total) = legacy_layers(&weights).unwrap();
            (layers.iter().map(|l| l.slot).collect::<Vec<_>>(), total)
        };
        let lstm = |scope: &'static str| {
            ["kernel:0", "recurrent_kernel:0"].map(move |r| format!("{scope}/lstm_cell/{r}"))
        };
        let join = |parts: &[Vec<String>]| -> Vec<String> { parts.concat() };
        let dense = vec!["dense/kernel:0".to_string(), "dense/bias:0".to_string()];
        let run = |parts: Vec<String>| slots(&parts.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            run(join(&[lstm("a").to_vec(), lstm("b").to_vec()])),
            (vec![0, 1], 2)
        );
        assert_eq!(
            run(join(&[
                lstm("a").to_vec(),
                dense.clone(),
                lstm("b").to_vec()
            ])),
            (vec![0, 2], 3)
        );
        assert_eq!(
            run(join(&[dense.clone(), lstm("a").to_vec(), dense.clone()])),
            (vec![1], 3)
        );
        assert_eq!(run(dense.clone()), (vec![], 1));
        // A Bidirectional is one layer: one slot for its two directions.
        let bi = |d: &'static str| {
            ["kernel:0", "recurrent_kernel:0"].map(move |r| format!("bi/{d}_lstm/lstm_cell/{r}"))
        };
        assert_eq!(
            run(join(&[
                bi("forward").to_vec(),
                bi("backward").to_vec(),
                lstm("b").to_vec()
            ])),
            (vec![0, 1], 2)
        );
        assert_eq!(
            run(join(&[
                bi("forward").to_vec(),
                bi("backward").to_vec(),
                dense,
                lstm("b").to_vec()
            ])),
            (vec![0, 2], 3)
        );
        assert_eq!(run(vec![]), (vec![], 0));
    }

    /// A nested layer's path below its top-level model and its weights' scope agree as
    /// far as both go: Keras 2 names the layer alone, Keras 3 the models around it too.
    #[test]
    fn nested_weights_belong_to_the_layer_whose_path_agrees_with_their_scope() {
        let paths = |scope: &[&str]| LayerPaths {
            name: String::new(),
            place: Place::Legacy {
                group: "enc".into(),
                scope: scope.iter().map(|s| s.to_string()).collect(),
            },
            slot: None,
            forward: DirectionPaths {
                kernel: String::new(),
                recurrent_kernel: String::new(),
                bias: None,
            },
            backward: None,
        };
        let entry = |path: &[&str]| LayerEntry {
            name: path.join("/"),
            path: path.iter().map(|s| s.to_string()).collect(),
            native_group: String::new(),
            class_name: "LSTM".into(),
            config: serde_json::Value::Null,
            inbound: Vec::new(),
            pass_through: false,
        };
        let nested = entry(&["enc", "inner", "rnn"]);
        assert!(paths(&["rnn"]).belong_to(&nested));
        assert!(paths(&["sequential", "enc", "inner", "rnn"]).belong_to(&nested));
        assert!(!paths(&["sequential", "enc", "rnn"]).belong_to(&nested));
        assert!(!paths(&["other"]).belong_to(&nested));
        assert!(paths(&["sequential", "enc", "rnn"]).belong_to(&entry(&["enc", "rnn"])));
        assert!(!paths(&["rnn"]).belong_to(&entry(&["dec", "rnn"])));
        // A cell the user named stays in the scope (`RNN(LSTMCell(name="enc_cell"))`).
        assert!(paths(&["rnn", "enc_cell"]).belong_to(&entry(&["enc", "rnn"])));
        // A top-level layer: its group.
        assert!(paths(&["seq", "enc"]).belong_to(&entry(&["enc"])));
    }

    #[test]
    fn a_backward_direction_that_differs_names_what_each_holds() {
        let forward = direction(true, false, 8);
        assert!(same_kind("f.h5", "bi", &forward, &direction(true, false, 8)).is_ok());
        let expected = "expected the forward direction's kind, sizes, bias and layout \
                        (LSTM of 8 units, input 3, with bias, Keras layout), got";
        for (backward, got) in [
            (
                direction(false, false, 8),
                "LSTM of 8 units, input 3, without bias, Keras layout",
            ),
            (
                direction(true, true, 8),
                "LSTM of 8 units, input 3, with bias, cuDNN layout",
            ),
            (
                direction(true, false, 5),
                "LSTM of 5 units, input 3, with bias, Keras layout",
            ),
        ] {
            let e = same_kind("f.h5", "bi", &forward, &backward)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("Keras layer 'bi' backward weights")
                    && e.ends_with(&format!("{expected} {got}")),
                "{e}"
            );
        }
    }
}
