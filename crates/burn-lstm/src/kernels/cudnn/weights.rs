//! From the canonical flat parameter buffer (PyTorch's order, [`RnnArch::direction_layout`])
//! to cuDNN's weight space, region by region as cuDNN reports it.

use cudnn_rnn::{CopyPlan, CopyRun, WeightKind, WeightSpaceLayout};

use crate::op::spec::RnnArch;

/// How the canonical buffer maps onto one weight space.
#[derive(Clone, Debug)]
pub(crate) struct WeightPlan {
    /// Canonical buffer to weight space.
    pub to_cudnn: CopyPlan,
    /// Weight space to canonical buffer (gradients).
    pub from_cudnn: CopyPlan,
    /// The two layouts coincide: the canonical buffer is passed to cuDNN as is.
    pub identity: bool,
    /// Elements of the weight space.
    pub space_len: usize,
    /// Whether some of the weight space is not a parameter (it is zeroed before use).
    pub has_gaps: bool,
}

impl WeightPlan {
    /// The plan for `arch` given cuDNN's `layout`, or why the layout does not fit.
    pub(crate) fn new(
        arch: &RnnArch,
        layout: &WeightSpaceLayout,
        elem: usize,
    ) -> Result<Self, String> {
        let gates = arch.hidden_size;
        let mut runs = Vec::with_capacity(layout.regions.len());
        for region in &layout.regions {
            let cell = arch.direction_layout(
                region.pseudo_layer / arch.dirs(),
                region.pseudo_layer % arch.dirs(),
            );
            let missing = || {
                format!(
                    "cuDNN reports {:?} of cell {} that the canonical layout does not have",
                    region.kind, region.pseudo_layer
                )
            };
            let (range, rows) = match region.kind {
                WeightKind::InputWeight => (Some(cell.weight_ih.clone()), gates),
                WeightKind::RecurrentWeight => (Some(cell.weight_hh.clone()), gates),
                WeightKind::InputBias => (cell.bias_ih.clone(), gates),
                WeightKind::RecurrentBias => (cell.bias_hh.clone(), gates),
                WeightKind::Projection => (cell.weight_hr.clone(), arch.output_size()),
            };
            let range = range.ok_or_else(missing)?;
            let per_gate = if region.kind == WeightKind::Projection {
                range.len()
            } else {
                range.len() / arch.cell.gates()
            };
            if per_gate != region.len || rows == 0 {
                return Err(format!(
                    "cuDNN's {:?} of cell {} has {} elements, the canonical one {per_gate}",
                    region.kind, region.pseudo_layer, region.len
                ));
            }
            runs.push(CopyRun {
                src: range.start + region.gate * per_gate,
                dst: region.offset,
                len: region.len,
            });
        }
        let to_cudnn = CopyPlan::new(runs);
        let canonical_len = arch.weight_count();
        if to_cudnn.covered() != canonical_len {
            return Err(format!(
                "cuDNN's weight space holds {} of the {canonical_len} parameters",
                to_cudnn.covered()
            ));
        }
        let space_len = layout.bytes / elem;
        Ok(Self {
            from_cudnn: to_cudnn.reversed(),
            identity: to_cudnn.is_identity(canonical_len) && space_len == canonical_len,
            has_gaps: space_len > canonical_len,
            to_cudnn,
            space_len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudnn_rnn::WeightRegion;

    fn arch() -> RnnArch {
        RnnArch {
            cell: crate::op::spec::CellKind::Lstm,
            input_size: 3,
            hidden_size: 2,
            proj_size: 0,
            num_layers: 1,
            bidirectional: false,
            bias: true,
        }
    }

    fn region(kind: WeightKind, gate: usize, offset: usize, len: usize) -> WeightRegion {
        WeightRegion {
            pseudo_layer: 0,
            kind,
            gate,
            offset,
            len,
        }
    }

    #[test]
    fn canonical_order_is_one_copy_or_none() {
        // The layout cuDNN uses today: all matrices of a cell, then all biases, gates in
        // order — the canonical order, so the plan is the identity.
        let mut regions = Vec::new();
        for g in 0..4 {
            regions.push(region(WeightKind::InputWeight, g, g * 6, 6));
        }
        for g in 0..4 {
            regions.push(region(WeightKind::RecurrentWeight, g, 24 + g * 4, 4));
        }
        for g in 0..4 {
            regions.push(region(WeightKind::InputBias, g, 40 + g * 2, 2));
        }
        for g in 0..4 {
            regions.push(region(WeightKind::RecurrentBias, g, 48 + g * 2, 2));
        }
        let layout = WeightSpaceLayout {
            bytes: 56 * 4,
            regions: regions.clone(),
        };
        let plan = WeightPlan::new(&arch(), &layout, 4).unwrap();
        assert!(plan.identity);
        assert_eq!(plan.to_cudnn.runs().len(), 1);

        // Biases first, gates of the recurrent matrix swapped, padding at the end: copies.
        let canonical_regions = regions.clone();
        let mut shuffled = regions;
        for r in shuffled.iter_mut() {
            r.offset = match r.kind {
                WeightKind::InputBias | WeightKind::RecurrentBias => r.offset - 40,
                WeightKind::InputWeight => r.offset + 16,
                WeightKind::RecurrentWeight => 40 + (3 - r.gate) * 4,
                WeightKind::Projection => unreachable!(),
            };
        }
        let layout = WeightSpaceLayout {
            bytes: 64 * 4,
            regions: shuffled,
        };
        let plan = WeightPlan::new(&arch(), &layout, 4).unwrap();
        assert!(!plan.identity && plan.has_gaps);
        assert_eq!(plan.space_len, 64);
        // W_ih (24), each of the 4 reversed W_hh gates, the biases (16): 6 runs.
        assert_eq!(plan.to_cudnn.runs().len(), 6, "{:?}", plan.to_cudnn);
        assert_eq!(plan.to_cudnn.covered(), 56);
        assert_eq!(plan.from_cudnn.covered(), 56);
        // Applied to the canonical buffer 0..56, every region of cuDNN's space holds its
        // canonical values, the padding nothing; the way back restores the buffer.
        let apply = |plan: &CopyPlan, from: &[f32], to: &mut [f32]| {
            for run in plan.runs() {
                to[run.dst..run.dst + run.len].copy_from_slice(&from[run.src..run.src + run.len]);
            }
        };
        let canonical: Vec<f32> = (0..56).map(|v| v as f32).collect();
        let mut space = vec![-1.0; 64];
        apply(&plan.to_cudnn, &canonical, &mut space);
        for (at, from) in layout.regions.iter().zip(&canonical_regions) {
            assert_eq!(
                space[at.offset..at.offset + at.len],
                canonical[from.offset..from.offset + from.len],
                "{at:?}"
            );
        }
        assert_eq!(space[56..], [-1.0; 8]);
        let mut back = vec![-1.0; 56];
        apply(&plan.from_cudnn, &space, &mut back);
        assert_eq!(back, canonical);
    }

    #[test]
    fn a_region_of_the_wrong_size_is_refused() {
        let layout = WeightSpaceLayout {
            bytes: 56 * 4,
            regions: vec![region(WeightKind::InputWeight, 0, 0, 5)],
        };
        let err = WeightPlan::new(&arch(), &layout, 4).unwrap_err();
        assert!(err.contains("has 5 elements, the canonical one 6"), "{err}");
    }

    /// A GRU's three gate blocks (r, z, n) in cuDNN's reported order map onto the
    /// canonical buffer with the GRU's per-gate sizes; the old 4-gate split would make
    /// every region the wrong size.
    #[test]
    fn a_gru_maps_three_gate_blocks() {
        let gru = RnnArch {
            cell: crate::op::spec::CellKind::Gru,
            ..arch()
        };
        // W_ih 3x(2x3), W_hh 3x(2x2), b_ih 3x2, b_hh 3x2 = 18 + 12 + 6 + 6 = 42.
        let mut regions = Vec::new();
        for g in 0..3 {
            regions.push(region(WeightKind::InputWeight, g, g * 6, 6));
            regions.push(region(WeightKind::RecurrentWeight, g, 18 + g * 4, 4));
            regions.push(region(WeightKind::InputBias, g, 30 + g * 2, 2));
            regions.push(region(WeightKind::RecurrentBias, g, 36 + g * 2, 2));
        }
        let layout = WeightSpaceLayout {
            bytes: 42 * 4,
            regions,
        };
        let plan = WeightPlan::new(&gru, &layout, 4).unwrap();
        assert!(plan.identity, "{:?}", plan.to_cudnn);
        assert_eq!(plan.to_cudnn.covered(), gru.weight_count());
    }
}
