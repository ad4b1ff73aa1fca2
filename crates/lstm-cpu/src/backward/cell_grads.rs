//! Where one (layer, direction) of the backward writes its gradients.

use crate::arch::DirectionLayout;

/// The gradients of one (layer, direction): its blocks of the flat weight gradient (at
/// `layout`'s offsets), its initial states' and its share of the layer input's.
pub(crate) struct CellGrads<'a, T> {
    pub d_weights: &'a mut [T],
    pub layout: &'a DirectionLayout,
    pub d_h0: &'a mut [T],
    pub d_c0: &'a mut [T],
    /// Accumulated over the layer's directions, stored by the first (`None`: not
    /// wanted).
    pub d_input: Option<&'a mut [T]>,
}
