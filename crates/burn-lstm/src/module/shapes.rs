//! The parameter shapes an architecture needs, checked against a module or a record
//! (Burn's own `load_record` would silently drop a missing bias or panic on a layer
//! count).

use burn::module::Param;
use burn::tensor::{Tensor, backend::Backend};

use crate::error::RnnError;
use crate::module::weights::{
    RnnDirectionWeights, RnnDirectionWeightsRecord, RnnLayer, RnnLayerRecord,
};
use crate::op::spec::RnnArch;

/// The parameter names of one direction, in canonical order.
pub(crate) const PARAM_NAMES: [&str; 5] =
    ["weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"];

/// Shapes the architecture needs for cell `(layer, direction)`, `None` where it has no such parameter.
pub(crate) fn expected_shapes(arch: &RnnArch, layer: usize) -> [Option<Vec<usize>>; 5] {
    let h4 = arch.gate_rows();
    [
        Some(vec![h4, arch.layer_input_size(layer)]),
        Some(vec![h4, arch.output_size()]),
        arch.bias.then(|| vec![h4]),
        arch.bias.then(|| vec![h4]),
        (arch.proj_size > 0).then(|| vec![arch.proj_size, arch.hidden_size]),
    ]
}

/// Parameter shapes of one direction, for modules and their records alike.
pub(crate) trait DirectionShapes {
    /// Shapes in [`PARAM_NAMES`] order.
    fn shapes(&self) -> [Option<Vec<usize>>; 5];
}

/// One layer's directions, for modules and their records alike.
pub(crate) trait LayerDirections {
    /// The direction type.
    type Direction: DirectionShapes;
    /// Forward and (optional) reverse.
    fn directions(&self) -> (&Self::Direction, Option<&Self::Direction>);
}

macro_rules! impl_shapes {
    ($direction:ident, $layer:ident) => {
        impl<B: Backend> DirectionShapes for $direction<B> {
            fn shapes(&self) -> [Option<Vec<usize>>; 5] {
                fn dims<B: Backend, const D: usize>(p: &Param<Tensor<B, D>>) -> Vec<usize> {
                    p.val().dims().to_vec()
                }
                [
                    Some(dims(&self.weight_ih)),
                    Some(dims(&self.weight_hh)),
                    self.bias_ih.as_ref().map(dims),
                    self.bias_hh.as_ref().map(dims),
                    self.weight_hr.as_ref().map(dims),
                ]
            }
        }
        impl<B: Backend> LayerDirections for $layer<B> {
            type Direction = $direction<B>;
            fn directions(&self) -> (&Self::Direction, Option<&Self::Direction>) {
                (&self.forward, self.reverse.as_ref())
            }
        }
    };
}
impl_shapes!(RnnDirectionWeights, RnnLayer);
impl_shapes!(RnnDirectionWeightsRecord, RnnLayerRecord);

/// Checks layer count, directions and every parameter shape against `arch`.
pub(crate) fn validate_layers<L: LayerDirections>(
    arch: &RnnArch,
    layers: &[L],
) -> Result<(), RnnError> {
    if layers.len() != arch.num_layers {
        return Err(RnnError::ParameterShape {
            name: "layers".into(),
            expected: vec![arch.num_layers],
            actual: vec![layers.len()],
        });
    }
    for (l, layer) in layers.iter().enumerate() {
        let (forward, reverse) = layer.directions();
        match (arch.bidirectional, reverse) {
            (true, None) => return Err(missing("the config", format!("layers.{l}.reverse"))),
            (false, Some(_)) => {
                return Err(unexpected("the config", format!("layers.{l}.reverse")));
            }
            _ => {}
        }
        for (direction, name) in
            core::iter::once((forward, "forward")).chain(reverse.map(|r| (r, "reverse")))
        {
            let expected = expected_shapes(arch, l);
            for ((param, expected), actual) in
                PARAM_NAMES.iter().zip(expected).zip(direction.shapes())
            {
                // Named only on an error: a forward checks its parameters on every call.
                let path = || format!("layers.{l}.{name}.{param}");
                match (expected, actual) {
                    (Some(e), Some(a)) if e != a => {
                        return Err(RnnError::ParameterShape {
                            name: path(),
                            expected: e,
                            actual: a,
                        });
                    }
                    (Some(_), None) => return Err(missing("the checkpoint", path())),
                    (None, Some(_)) => return Err(unexpected("the checkpoint", path())),
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn missing(source: &str, name: String) -> RnnError {
    RnnError::CheckpointTensor {
        source_name: source.into(),
        problem: "missing",
        name,
        hint: None,
    }
}

pub(crate) fn unexpected(source: &str, name: String) -> RnnError {
    RnnError::CheckpointTensor {
        source_name: source.into(),
        problem: "unexpected",
        name,
        hint: None,
    }
}
