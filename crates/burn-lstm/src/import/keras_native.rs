//! Keras 3's layout (also tf-keras's `.keras` and `.weights.h5`): a model's layer list
//! `layers/{group}` (tf-keras 2.13: `_layer_checkpoint_dependencies/{group}`), each
//! group named after its layer's class (`lstm`, `lstm_1`, ...) with its `vars` carrying
//! the layer's name as its `name` attribute (Keras 3); a recurrent layer's weights in
//! `{group}/cell/vars/{0,1,2}` (kernel, recurrent kernel, bias), a `Bidirectional`'s in
//! `{group}/{forward,backward}_layer/cell/vars/...`. A nested model keeps its own
//! `layers/` (`layers/functional/layers/lstm`); a subclassed model keeps a layer under
//! its attribute's name (`encoder/cell/vars/0`) when Keras's alphabetical walk of the
//! attributes meets it before `layers`.

use crate::error::RnnError;
use crate::import::hdf5::{H5, io};
use crate::import::keras_config::{MAX_NESTING, Numbering, stem_number};
use crate::import::keras_paths::{DirectionPaths, LayerPaths, Place, join};

/// Every layer of a Keras 3 layout that holds recurrent weights.
pub(crate) fn layers(h5: &H5) -> Result<Vec<LayerPaths>, RnnError> {
    let mut out = Vec::new();
    native(h5, "", &[], "", &mut 0, &mut out)?;
    Ok(out)
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

/// The groups of a list in the order Keras numbered them (`lstm`, `lstm_1`, ...,
/// `lstm_10`; h5py lists them alphabetically).
fn in_numbered_order(mut groups: Vec<String>) -> Vec<String> {
    groups.sort_by(|a, b| stem_number(a).cmp(&stem_number(b)));
    groups
}

/// The group a list member (in numbered order) has in the architecture: its class and
/// its rank in the list (`lstm`, `lstm_1`), whatever numbers the file gave (tf-keras
/// 2.13 numbers a layer with weights twice: `lstm`, `lstm_2` for two LSTMs).
fn ranked(numbering: &mut Numbering, group: &str) -> String {
    numbering.next(stem_number(group).0.to_string())
}

/// The layer's name a Keras 3 `vars` group carries (tf-keras's carry none).
fn vars_name(h5: &H5, vars: &str) -> Result<Option<String>, RnnError> {
    Ok(h5
        .attr_strings(vars, "name")?
        .and_then(|v| v.into_iter().next()))
}

/// How many layer groups a Keras 3 file's walk visits at most: groups linked from
/// several places are visited once per place.
const MAX_GROUP_VISITS: usize = 16_384;

/// Counts `groups` more visited groups, refusing a walk past [`MAX_GROUP_VISITS`].
fn visit(h5: &H5, visits: &mut usize, groups: usize) -> Result<(), RnnError> {
    *visits += groups;
    if *visits > MAX_GROUP_VISITS {
        return Err(io(
            h5.source(),
            format!("more than {MAX_GROUP_VISITS} layer groups (groups linked from many places)"),
        ));
    }
    Ok(())
}

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
    visit(h5, visits, listed.len() + children.len())?;
    // (path, name, whether the file names it, group as the architecture names it)
    let mut members: Vec<(String, String, bool, String)> = Vec::new();
    let mut numbering = Numbering::default();
    let list_group = if group.is_empty() {
        String::new()
    } else {
        format!("{group}/layers")
    };
    for member in in_numbered_order(listed) {
        let path = join(&list, &member);
        let named = vars_name(h5, &format!("{path}/vars"))?;
        let ranked = ranked(&mut numbering, &member);
        let name = named.clone().unwrap_or(member);
        members.push((path, name, named.is_some(), join(&list_group, &ranked)));
    }
    for child in in_numbered_order(children) {
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
    visit(h5, visits, cells.len())?;
    let mut numbering = Numbering::default();
    for cell in in_numbered_order(cells) {
        let vars = format!("{list}/{cell}/vars");
        let Some(forward) = vars_direction(h5, &vars)? else {
            continue;
        };
        let ranked = ranked(&mut numbering, &cell);
        let own = vars_name(h5, &vars)?;
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
