"""The words of ``pdlab doctor`` (:mod:`pdlab.tools.doctor`), of the line naming the kernels'
backend (:func:`pdlab.ui.choices.kernels_line`, which the doctor and notebook 04 print),
of ``pdlab notebooks`` and of ``pdlab lab`` (:mod:`pdlab.tools.lab`), in English and
Simplified Chinese. pdlab's own; it mirrors no upstream file. Package names, commands,
environment variables and the tags ``[OK]``/``[WARN]``/``[FAIL]`` stay as they are in both
languages (a pasted report reads the same)."""

from __future__ import annotations

TEXT_DOCTOR: dict[str, dict[str, str]] = {
    # ---- component names (the second column) -----------------------------------------
    "doc_name_kernels": {"en": "kernels", "zh": "算子"},
    "doc_name_backend": {"en": "backend", "zh": "后端"},
    "doc_name_browser": {"en": "browser", "zh": "浏览器"},
    "doc_name_model": {"en": "model", "zh": "模型"},
    "doc_name_torch_build": {"en": "torch build", "zh": "torch 版本"},
    "doc_name_aot": {"en": "aot", "zh": "AOT 编译"},
    # ---- details and fixes -----------------------------------------------------------
    "doc_not_installed": {"en": "not installed", "zh": "未安装"},
    "doc_pip_fix": {
        "en": "pip install -e . (or: pip install {name})",
        "zh": "pip install -e .（或者：pip install {name}）",
    },
    "doc_pdlab": {
        "en": "{version} at {where}; notebooks in {notebooks}",
        "zh": "{version}，位于 {where}；笔记本在 {notebooks}",
    },
    "doc_pdlab_broken": {
        "en": "{version} at {where}; {error}",
        "zh": "{version}，位于 {where}；{error}",
    },
    "doc_pdlab_fix": {"en": "reinstall pdlab", "zh": "重新安装 pdlab"},
    "doc_python": {"en": "{version} ({system} {machine})", "zh": "{version}（{system} {machine}）"},
    "doc_python_fix": {
        "en": "pdlab needs Python 3.10 or newer",
        "zh": "pdlab 需要 Python 3.10 或更新的版本",
    },
    "doc_torch": {"en": "{version} (device: {device})", "zh": "{version}（设备：{device}）"},
    "doc_import_failed": {"en": "import failed: {error}", "zh": "导入失败：{error}"},
    "doc_cuda_build": {
        "en": "{version} is the CUDA {cuda} build, {gb:.1f} GB on disk with its nvidia-* "
        "packages, and this machine has no NVIDIA GPU",
        "zh": "{version} 是 CUDA {cuda} 版本，连同 'nvidia-*' 包在磁盘上占 {gb:.1f} GB，"
        "而这台机器没有 NVIDIA GPU",
    },
    "doc_cuda_build_fix": {
        "en": "a CPU build works the same here: pip install --force-reinstall torch --index-url "
        "{index}, then pip uninstall the nvidia-* packages (or: make clean && make env)",
        "zh": "在这里 CPU 版本完全一样能用：pip install --force-reinstall torch --index-url {index}"
        "，再用 pip uninstall 卸载 'nvidia-*' 包（或者：make clean && make env）",
    },
    "doc_triton_missing": {
        "en": "not installed (Linux wheels only)",
        "zh": "未安装（只有 Linux 的 wheel）",
    },
    "doc_triton_fix": {
        "en": "optional: the kernels run as their torch twins; on Linux: pip install triton",
        "zh": "可选：算子以 torch 版本运行；在 Linux 上：pip install triton",
    },
    "doc_kernels_lead": {
        "en": "{default}: pdlab tour, trace and pd run it by default",
        "zh": "{default}：pdlab tour、pdlab trace 和 pdlab pd 默认运行它",
    },
    "doc_kernels_triton": {
        "en": "{lead}; --backend triton runs Triton ({how})",
        "zh": "{lead}；--backend triton 运行 Triton（{how}）",
    },
    "doc_interpreted": {"en": "interpreter, slow", "zh": "解释器，较慢"},
    "doc_compiled": {"en": "compiled", "zh": "编译执行"},
    "doc_kernels_needs": {
        "en": "{lead}; --backend triton needs triton",
        "zh": "{lead}；--backend triton 需要 triton",
    },
    "doc_kernels_bad": {"en": "{lead}; {error}", "zh": "{lead}；{error}"},
    "doc_kernels_fix": {
        "en": "optional: every command runs on the torch kernels",
        "zh": "可选：每条命令都能用 torch 算子运行",
    },
    "doc_backend_ok": {
        "en": "{described}: Python code and notebooks",
        "zh": "{described}：Python 代码和笔记本使用它",
    },
    "doc_backend_failed": {"en": "selection failed: {error}", "zh": "选择失败：{error}"},
    "doc_fix_check_indices": {
        "en": "unset PDLAB_CHECK_INDICES, or set it to 1 (check) or 0 (skip)",
        "zh": "取消 PDLAB_CHECK_INDICES，或者把它设为 1（检查）或 0（跳过）",
    },
    "doc_fix_backend_env": {
        "en": "unset PDLAB_BACKEND, or set it to auto, triton or torch",
        "zh": "取消 PDLAB_BACKEND，或者把它设为 'auto'、'triton' 或 'torch'",
    },
    "doc_fix_backend": {
        "en": "set PDLAB_BACKEND=torch or reinstall triton",
        "zh": "设置 PDLAB_BACKEND=torch，或者重新安装 triton",
    },
    "doc_no_browser": {"en": "no web browser found", "zh": "没有找到网页浏览器"},
    "doc_no_browser_fix": {
        "en": "optional: pdlab lab prints the address to open by hand",
        "zh": "可选：pdlab lab 会打印地址，手动打开即可",
    },
    "doc_browser_ok": {"en": "{name} (pdlab lab opens it)", "zh": "{name}（pdlab lab 会打开它）"},
    "doc_browser_found": {"en": "found", "zh": "已找到"},
    "doc_widgets_fix": {"en": "pip install 'ipywidgets>=8'", "zh": "pip install 'ipywidgets>=8'"},
    "doc_widgets_no_ext": {
        "en": "{version}, lab extension missing",
        "zh": "{version}，缺少 JupyterLab 扩展",
    },
    "doc_widgets_ext_fix": {
        "en": "pip install --force-reinstall jupyterlab_widgets",
        "zh": "pip install --force-reinstall jupyterlab_widgets",
    },
    "doc_widgets_ok": {
        "en": "{version} (lab extension jupyterlab_widgets {ext})",
        "zh": "{version}（JupyterLab 扩展 jupyterlab_widgets {ext}）",
    },
    "doc_model_ok": {
        "en": "tiny DeepSeek-style forward OK ({ms:.0f} ms)",
        "zh": "tiny 模型（DeepSeek 结构）前向计算正常（{ms:.0f} ms）",
    },
    "doc_model_nonfinite": {
        "en": "tiny model produced non-finite logits",
        "zh": "tiny 模型算出了非有限的 logits",
    },
    "doc_model_failed": {
        "en": "tiny forward failed: {error}",
        "zh": "tiny 模型前向计算失败：{error}",
    },
    "doc_report": {"en": "report this with the lines above", "zh": "请连同上面几行一起报告"},
    "doc_aot_no_triton": {
        "en": "triton is not installed: nothing to compile",
        "zh": "未安装 triton：没有要编译的东西",
    },
    "doc_aot_no_triton_fix": {
        "en": "optional: only the Triton kernels need it; on Linux: pip install triton",
        "zh": "可选：只有 Triton 算子需要它；在 Linux 上：pip install triton",
    },
    "doc_aot_no_compiler": {
        "en": "the compiler could not run: {error}",
        "zh": "编译器无法运行：{error}",
    },
    "doc_aot_no_compiler_fix": {
        "en": "optional: reinstall triton (it ships ptxas)",
        "zh": "可选：重新安装 triton（它自带 ptxas）",
    },
    "doc_aot_summary": {
        "en": "{ok}/{n} kernel builds compiled for sm_80 and sm_90, {spills}",
        "zh": "{ok}/{n} 个算子构建已为 sm_80 和 sm_90 编译，{spills}",
    },
    "doc_aot_spilling": {
        "en": "{n} spilling registers (the spills column)",
        "zh": "{n} 个有寄存器溢出（见“溢出”列）",
    },
    "doc_aot_no_spills": {"en": "none spills", "zh": "都没有寄存器溢出"},
    "doc_aot_fix": {"en": "report the FAIL rows above", "zh": "请报告上面的 FAIL 行"},
    # ---- the verdict -----------------------------------------------------------------
    "doc_cannot_run": {
        "en": "pdlab cannot run here: fix the FAIL lines above.",
        "zh": "pdlab 在这里无法运行：请先修好上面的 FAIL 行。",
    },
    "doc_can_run_warned": {
        "en": "pdlab can run here; the WARN lines are optional pieces.",
        "zh": "pdlab 可以在这里运行；WARN 行是可选的部分。",
    },
    "doc_can_run": {"en": "pdlab can run here.", "zh": "pdlab 可以在这里运行。"},
    # ---- the AOT table (pdlab/tools/aot.py) ------------------------------------------
    "aot_title": {
        "en": "Ahead-of-time compilation (no GPU needed)",
        "zh": "AOT 预先编译（不需要 GPU）",
    },
    "aot_col_kernel": {"en": "kernel", "zh": "算子"},
    "aot_col_target": {"en": "target", "zh": "架构"},
    "aot_col_dtype": {"en": "dtype", "zh": "类型"},
    "aot_col_widths": {"en": "widths", "zh": "宽度"},
    "aot_col_ok": {"en": "ok", "zh": "结果"},
    "aot_col_copy": {"en": "copy", "zh": "拷贝"},
    "aot_col_regs": {"en": "regs", "zh": "寄存器"},
    "aot_col_spills": {"en": "spills", "zh": "溢出"},
    "aot_col_shared": {"en": "shared", "zh": "共享内存"},
    "aot_col_s": {"en": "s", "zh": "秒"},
    "aot_ok": {"en": "ok", "zh": "通过"},
    # ---- the backend's description (pdlab/kernels/backend.py) ------------------------
    "be_chosen": {"en": "chosen via {env}", "zh": "由 {env} 选定"},
    "be_no_triton": {
        "en": "auto: triton not installed",
        "zh": "自动选择（PDLAB_BACKEND=auto）：未安装 triton",
    },
    "be_no_gpu": {
        "en": "auto: no GPU and TRITON_INTERPRET is not 1",
        "zh": "自动选择（PDLAB_BACKEND=auto）：没有 GPU，且 TRITON_INTERPRET 不是 1",
    },
    "be_torch": {"en": "torch ({why})", "zh": "torch（{why}）"},
    "be_interpreted": {
        "en": "triton (interpreter, TRITON_INTERPRET=1, CPU)",
        "zh": "triton（解释器，TRITON_INTERPRET=1，CPU）",
    },
    "be_compiled": {"en": "triton (compiled, {gpu})", "zh": "triton（编译执行，{gpu}）"},
    # ---- pdlab notebooks -------------------------------------------------------------
    "nbs_copied": {
        "en": "{n} notebooks in {dir}; open them with: pdlab lab --dir {dir}",
        "zh": "{dir} 里有 {n} 个笔记本；这样打开：pdlab lab --dir {dir}",
    },
    # ---- pdlab lab ---------------------------------------------------------------------
    "lab_copied": {"en": "copied {n} notebooks into {dir}", "zh": "已把 {n} 个笔记本复制到 {dir}"},
    "lab_kept": {
        "en": "kept your edits in {names}; `pdlab notebooks {dir} --force` replaces them with "
        "the shipped versions",
        "zh": "保留了你在 {names} 里的修改；`pdlab notebooks {dir} --force` 会用随包发布的版本"
        "替换它们",
    },
    "lab_serving": {
        "en": "JupyterLab on {dir} (your working copy; Ctrl-C to stop)",
        "zh": "JupyterLab 已在 {dir} 启动（你的工作副本；按 Ctrl-C 停止）",
    },
}
