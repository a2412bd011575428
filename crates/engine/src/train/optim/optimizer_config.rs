//! How a run's weights move: the optimizer settings of a run file, shared by image and
//! tabular runs.

use serde::{Deserialize, Serialize};

use crate::train::{FusedAdamConfig, FusedSgdConfig};

/// How the weights move.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum OptimizerConfig {
    /// Δw(t+1) = −η ∂E/∂w + α Δw(t) − η λ w, with learning rate η, momentum α and L2
    /// penalty λ: SGD with undampened momentum and weight decay, run by [`FusedSgdConfig`]
    /// (one update launch for the whole network on a GPU).
    Sgd {
        learning_rate: f64,
        #[serde(default)]
        momentum: f64,
        /// Nesterov's momentum (PyTorch's `nesterov=True`): the step is `g + α·v` instead of
        /// `v`.
        #[serde(default)]
        nesterov: bool,
        #[serde(default)]
        l2: f64,
    },
    /// Adam with an L2 penalty λ added to the gradient.
    Adam {
        learning_rate: f64,
        #[serde(default)]
        l2: f64,
    },
}

impl Default for OptimizerConfig {
    fn default() -> Self {
        OptimizerConfig::Sgd {
            learning_rate: 0.01,
            momentum: 0.9,
            nesterov: false,
            l2: 0.0,
        }
    }
}

impl OptimizerConfig {
    /// The (constant) learning rate η.
    pub fn learning_rate(&self) -> f64 {
        match *self {
            OptimizerConfig::Sgd { learning_rate, .. }
            | OptimizerConfig::Adam { learning_rate, .. } => learning_rate,
        }
    }

    /// SGD with momentum α (Nesterov's if `nesterov`) and L2 penalty λ, as
    /// [`OptimizerConfig::Sgd`] describes.
    pub fn sgd(momentum: f64, nesterov: bool, l2: f64) -> FusedSgdConfig {
        FusedSgdConfig::new()
            .with_momentum(momentum)
            .with_nesterov(nesterov)
            .with_weight_decay(l2)
    }

    /// Adam (Burn's, fused into one kernel) with an L2 penalty.
    pub fn adam(l2: f64) -> FusedAdamConfig {
        FusedAdamConfig::new().with_weight_decay(l2 as f32)
    }

    /// The L2 penalty λ.
    pub fn l2(&self) -> f64 {
        match *self {
            OptimizerConfig::Sgd { l2, .. } | OptimizerConfig::Adam { l2, .. } => l2,
        }
    }

    /// Refuses settings that cannot train, naming the setting.
    pub fn validate(&self) -> Result<(), String> {
        let lr = self.learning_rate();
        if !(lr > 0.0 && lr.is_finite()) {
            return Err(format!("learning rate must be positive, got {lr}"));
        }
        let (momentum, l2) = match *self {
            OptimizerConfig::Sgd {
                momentum, nesterov, ..
            } => {
                if nesterov && momentum == 0.0 {
                    return Err("nesterov needs a momentum above 0".into());
                }
                (momentum, self.l2())
            }
            OptimizerConfig::Adam { l2, .. } => (0.0, l2),
        };
        if !(0.0..1.0).contains(&momentum) {
            return Err(format!("momentum must be in [0, 1), got {momentum}"));
        }
        if !(l2 >= 0.0 && l2.is_finite()) {
            return Err(format!("l2 must be zero or positive, got {l2}"));
        }
        Ok(())
    }
}
