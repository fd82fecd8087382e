"""Plan a training run before it starts: per-node downloads and cache from the exact order, modelled time.

``plan_training`` (``plan``) takes index entries; ``plan_source`` (``source``) takes paths or URLs;
``probe`` measures bandwidth and decode time against the store; ``report`` renders tables, JSON and
the plot. See ``docs/planning.md``.
"""

from mds_core.plan.figures import Environment, EpochFigures, NodeEpoch, Recommendation, TrainingPlan
from mds_core.plan.plan import plan_training

__all__ = ["Environment", "EpochFigures", "NodeEpoch", "Recommendation", "TrainingPlan", "plan_training"]
