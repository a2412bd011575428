//! The learning-rate schedules of image runs, one scheduler type whose record is the step
//! count (as Burn's cosine scheduler's is, so checkpoints of either kind resume).

use burn::lr_scheduler::LrScheduler;
use burn::lr_scheduler::cosine::{CosineAnnealingLrScheduler, CosineAnnealingLrSchedulerConfig};
use burn::optim::LearningRate;
use burn::prelude::*;
use serde::{Deserialize, Serialize};

/// How an image run's learning rate moves from its peak over the run's steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LrSchedule {
    /// Annealed to 0 along a half cosine.
    #[default]
    Cosine,
    /// The peak rate throughout.
    Constant,
}

impl LrSchedule {
    /// The scheduler of a run of `steps` optimizer steps peaking at `peak`.
    pub fn init(self, peak: LearningRate, steps: usize) -> Result<RunSchedule, String> {
        Ok(RunSchedule {
            kind: self,
            peak,
            cosine: CosineAnnealingLrSchedulerConfig::new(peak, steps.max(1)).init()?,
        })
    }
}

/// A [`LrSchedule`] stepping through a run; the cosine curve counts the steps of both kinds.
#[derive(Clone, Debug)]
pub struct RunSchedule {
    kind: LrSchedule,
    peak: LearningRate,
    cosine: CosineAnnealingLrScheduler,
}

impl LrScheduler for RunSchedule {
    type Record<B: Backend> = usize;

    fn step(&mut self) -> LearningRate {
        let cosine = self.cosine.step();
        match self.kind {
            LrSchedule::Cosine => cosine,
            LrSchedule::Constant => self.peak,
        }
    }

    fn to_record<B: Backend>(&self) -> Self::Record<B> {
        self.cosine.to_record::<B>()
    }

    fn load_record<B: Backend>(self, record: Self::Record<B>) -> Self {
        Self {
            cosine: self.cosine.load_record::<B>(record),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::NdArray;

    use super::*;

    #[test]
    fn cosine_is_burns_and_constant_keeps_the_peak_and_both_resume_at_their_step() {
        let mut burns = CosineAnnealingLrSchedulerConfig::new(0.1, 10)
            .init()
            .unwrap();
        let mut cosine = LrSchedule::Cosine.init(0.1, 10).unwrap();
        let mut constant = LrSchedule::Constant.init(0.1, 10).unwrap();
        for _ in 0..4 {
            assert_eq!(cosine.step(), burns.step());
            assert_eq!(constant.step(), 0.1);
        }
        let record = cosine.to_record::<NdArray>();
        assert_eq!(record, burns.to_record::<NdArray>());
        let mut resumed = LrSchedule::Cosine
            .init(0.1, 10)
            .unwrap()
            .load_record::<NdArray>(record);
        assert_eq!(resumed.step(), burns.step());
        assert!(resumed.step() < 0.1);
    }
}
