"""The MoE experiments at toy scale: MoE vs dense, the capacity-factor ablation, load balancing (issue 27)."""
